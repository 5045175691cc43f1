"""Small fixed datasets shared by the search and aggregation tests."""

PRODUCTS_MAPPING = {
    "properties": {
        "title": {"type": "text", "fields": {"keyword": {"type": "keyword"}}},
        "body": {"type": "text", "analyzer": "english"},
        "tags": {"type": "keyword"},
        "category": {"type": "keyword"},
        "price": {"type": "double"},
        "qty": {"type": "integer"},
        "created": {"type": "date"},
        "available": {"type": "boolean"},
        "ip": {"type": "ip"},
        "sku": {"type": "keyword"},
    }
}

PRODUCTS = {
    "1": {"title": "The quick brown fox", "body": "A fox jumping over fences", "tags": ["animal", "fast"],
          "category": "a", "price": 10.0, "qty": 5, "created": "2024-01-01T00:00:00Z", "available": True,
          "ip": "10.0.0.1", "sku": "SKU-001"},
    "2": {"title": "The lazy dog sleeps", "body": "Dogs sleeping all day long", "tags": ["animal", "slow"],
          "category": "a", "price": 20.5, "qty": 3, "created": "2024-01-15T12:00:00Z", "available": False,
          "ip": "10.0.0.2", "sku": "SKU-002"},
    "3": {"title": "Quick brown dogs and foxes jump", "body": "The foxes jumped and the dogs ran",
          "tags": ["animal"], "category": "b", "price": 30.0, "qty": 10, "created": "2024-02-01T08:30:00Z",
          "available": True, "ip": "10.0.1.1", "sku": "SKU-003"},
    "4": {"title": "A fast car on the road", "body": "Cars driving fast on roads", "tags": ["vehicle", "fast"],
          "category": "c", "price": 15000.0, "qty": 1, "created": "2024-02-20T00:00:00Z", "available": True,
          "ip": "192.168.1.1", "sku": "SKU-004"},
    "5": {"title": "Slow boats sail the sea", "body": "Boats sailing slowly", "tags": ["vehicle", "slow"],
          "category": "c", "price": 50000.0, "qty": 2, "created": "2024-03-05T00:00:00Z", "available": False,
          "ip": "192.168.1.2", "sku": "SKU-005"},
    "6": {"title": "Brown bread recipe", "body": "Baking bread at home", "tags": ["food"], "category": "d",
          "price": 3.5, "qty": 100, "created": "2024-03-10T00:00:00Z", "available": True, "ip": "10.1.0.1",
          "sku": "SKU-006"},
    "7": {"title": "Foxes are quick and clever", "body": "A clever fox outsmarts the hounds",
          "tags": ["animal", "clever"], "category": "b", "price": 12.0, "qty": 7,
          "created": "2024-03-15T00:00:00Z", "available": True, "ip": "10.0.0.3", "sku": "SKU-007"},
    "8": {"title": "Quantum computing explained", "body": "Qubits and superposition", "category": "e",
          "qty": 0, "created": "2023-12-31T23:00:00Z", "available": True, "sku": "SKU-008"},
    "9": {"title": "Brown fox brown fox brown fox", "body": "Repetition of the fox", "tags": ["animal"],
          "category": "a", "price": 8.0, "qty": 9, "created": "2024-01-10T00:00:00Z", "available": False,
          "ip": "10.0.0.9", "sku": "OTHER-009"},
    "10": {"title": "Electric bikes", "body": "Bikes with electric motors", "tags": ["vehicle"],
           "category": "c", "price": 1200.0, "qty": 4, "created": "2024-04-01T00:00:00Z", "available": True,
           "ip": "10.2.0.1", "sku": "SKU-010"},
}

ALL_IDS = set(PRODUCTS)
