//! The mapping limits of `index.mapping.*.limit`, checked on every mapping change (index
//! creation, put mapping, dynamic updates from documents) as OpenSearch's
//! `MappingLookup.checkLimits` does: what counts is what that lookup holds — every object
//! below the root, every field and every multi-field (Shoal has no field aliases, no
//! `nested` and no user-visible metadata fields to count).

use crate::mapping::{join, ObjectMapping, Property};
use crate::{FieldMapping, MapperError, Mapping};

/// The limits in force for one index (its settings, or OpenSearch's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappingLimits {
    /// `index.mapping.total_fields.limit`
    pub total_fields: i64,
    /// `index.mapping.depth.limit`: the root is depth 1, an object `a` depth 2.
    pub depth: i64,
    /// `index.mapping.field_name_length.limit`: on each simple (last-segment) name.
    pub field_name_length: i64,
}

impl Default for MappingLimits {
    fn default() -> Self {
        MappingLimits {
            total_fields: 1000,
            depth: 20,
            field_name_length: i32::MAX as i64,
        }
    }
}

/// What the limits are checked against, collected in one walk of the mapping.
#[derive(Default)]
struct Census<'a> {
    total: i64,
    /// Full paths of the objects below the root, depth first.
    objects: Vec<String>,
    /// Simple names of objects, fields and multi-fields, depth first.
    names: Vec<&'a str>,
}

impl Mapping {
    /// Refuses a mapping over one of `limits`, with OpenSearch's `illegal_argument_exception`
    /// texts, checked in OpenSearch's order (total fields, depth, name length).
    pub fn check_limits(&self, limits: &MappingLimits) -> Result<(), MapperError> {
        let mut census = Census::default();
        census.object(&self.root, "");
        if census.total > limits.total_fields {
            return Err(MapperError::Conflict(format!(
                "Limit of total fields [{}] has been exceeded",
                limits.total_fields
            )));
        }
        if let Some(path) = census
            .objects
            .iter()
            .find(|path| depth_of(path) > limits.depth)
        {
            return Err(MapperError::Conflict(format!(
                "Limit of mapping depth [{}] has been exceeded due to object field [{path}]",
                limits.depth
            )));
        }
        if let Some(name) = census
            .names
            .iter()
            .find(|name| name.chars().count() as i64 > limits.field_name_length)
        {
            return Err(MapperError::Conflict(format!(
                "Field name [{name}] is longer than the limit of [{}] characters",
                limits.field_name_length
            )));
        }
        Ok(())
    }

    /// How many fields count towards `index.mapping.total_fields.limit`.
    pub fn total_fields(&self) -> i64 {
        let mut census = Census::default();
        census.object(&self.root, "");
        census.total
    }
}

/// An object at `a.b` sits at depth 3: the root is 1, and each dot one level more.
fn depth_of(path: &str) -> i64 {
    path.matches('.').count() as i64 + 2
}

impl<'a> Census<'a> {
    fn object(&mut self, object: &'a ObjectMapping, prefix: &str) {
        for (name, property) in &object.properties {
            self.total += 1;
            self.names.push(name);
            match property {
                Property::Object(child) => {
                    let path = join(prefix, name);
                    self.objects.push(path.clone());
                    self.object(child, &path);
                }
                Property::Field(field) => self.multi_fields(field),
            }
        }
    }

    fn multi_fields(&mut self, field: &'a FieldMapping) {
        for (name, sub) in &field.fields {
            self.total += 1;
            self.names.push(name);
            self.multi_fields(sub);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits(total_fields: i64, depth: i64, field_name_length: i64) -> MappingLimits {
        MappingLimits {
            total_fields,
            depth,
            field_name_length,
        }
    }

    #[test]
    fn objects_fields_and_multi_fields_all_count() {
        let m = Mapping::from_json(&json!({"properties": {
            "title": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
            "user": {"properties": {"name": {"type": "keyword"}, "id": {"type": "long"}}}
        }}))
        .unwrap();
        // title, title.raw, user, user.name, user.id
        assert_eq!(m.total_fields(), 5);
        assert!(m.check_limits(&limits(5, 20, 100)).is_ok());
        let err = m.check_limits(&limits(4, 20, 100)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Limit of total fields [4] has been exceeded"
        );
        assert_eq!(err.error_type(), "illegal_argument_exception");
    }

    #[test]
    fn depth_counts_the_root_as_one_and_only_objects() {
        let m = Mapping::from_json(&json!({"properties": {"a.b.c": {"type": "keyword"}}})).unwrap();
        // objects a (depth 2) and a.b (depth 3); the leaf c adds no depth.
        assert!(m.check_limits(&limits(1000, 3, 100)).is_ok());
        assert_eq!(
            m.check_limits(&limits(1000, 2, 100))
                .unwrap_err()
                .to_string(),
            "Limit of mapping depth [2] has been exceeded due to object field [a.b]"
        );
        assert_eq!(
            m.check_limits(&limits(1000, 1, 100))
                .unwrap_err()
                .to_string(),
            "Limit of mapping depth [1] has been exceeded due to object field [a]"
        );
    }

    #[test]
    fn name_length_applies_to_each_simple_name() {
        let m = Mapping::from_json(&json!({"properties": {
            "abc.defg": {"type": "keyword", "fields": {"longest": {"type": "keyword"}}}
        }}))
        .unwrap();
        assert!(m.check_limits(&limits(1000, 20, 7)).is_ok());
        assert_eq!(
            m.check_limits(&limits(1000, 20, 6))
                .unwrap_err()
                .to_string(),
            "Field name [longest] is longer than the limit of [6] characters"
        );
    }

    #[test]
    fn defaults_are_opensearch_defaults() {
        assert_eq!(MappingLimits::default(), limits(1000, 20, i32::MAX as i64));
        assert!(Mapping::default()
            .check_limits(&MappingLimits::default())
            .is_ok());
    }
}
