//! Generates the tonic client and server stubs of the transport service without protoc.
//!
//! The messages are hand-written prost structs (`src/wire.rs`), so only the service plumbing is
//! generated here with tonic-build's `manual` builder; nothing outside Rust is needed to build.

fn main() {
    let method = |name: &str, route: &str| {
        tonic_build::manual::Method::builder()
            .name(name)
            .route_name(route)
            .input_type("crate::wire::WireRequest")
            .output_type("crate::wire::WireReply")
            .codec_path("tonic_prost::ProstCodec")
    };
    let service = tonic_build::manual::Service::builder()
        .name("Rpc")
        .package("shoal.transport")
        .method(method("invoke", "Invoke").build())
        .method(
            method("invoke_stream", "InvokeStream")
                .server_streaming()
                .build(),
        )
        .build();
    tonic_build::manual::Builder::new().compile(&[service]);
    println!("cargo:rerun-if-changed=build.rs");
}
