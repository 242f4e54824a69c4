//! Writes the generated parts of docs/ (tools.md, errors.md) from proto.
fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    std::fs::create_dir_all(&root).expect("docs/");
    std::fs::write(root.join("errors.md"), nish_proto::docs::errors_md()).expect("errors.md");
    std::fs::write(root.join("tools.md"), nish_proto::docs::tools_md()).expect("tools.md");
    println!("wrote docs/errors.md and docs/tools.md");
}
