//! Prints the size of the tools/list result and of each input schema.
fn main() {
    let all = serde_json::to_string(&nish_proto::tools::tools_list()).unwrap();
    println!(
        "tools/list: {} bytes for {} tools",
        all.len(),
        nish_proto::tools::TOOLS.len()
    );
    for t in nish_proto::tools::TOOLS {
        println!(
            "{:28} {:5}",
            t.name,
            serde_json::to_string(&t.list_entry()).unwrap().len()
        );
    }
}
