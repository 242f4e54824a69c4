//! Each agent binary, as the broker starts it, cannot open a network socket, create or write a
//! file, or exec: `<agent> --self-test` locks down exactly as in service and tries each of these
//! for real; every one must be refused, while Unix sockets and reads still work.

use nish_testdesk::session::workspace_bin;
use serde_json::Value;

#[test]
fn agents_refuse_network_files_and_exec() {
    for agent in ["nish-reader", "nish-input", "nish-indicator"] {
        let bin = workspace_bin(agent).expect("the agent is built");
        let out = std::process::Command::new(&bin)
            .arg("--self-test")
            .output()
            .expect("runs");
        assert!(
            out.status.success(),
            "{agent} --self-test failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
        let l = &v["lockdown"];
        assert_eq!(l["no_new_privs"], true, "{agent}");
        assert_eq!(l["caps_empty"], true, "{agent}");
        assert_eq!(l["seccomp"], true, "{agent}");
        assert_eq!(l["landlock"], "full", "{agent} (this kernel has Landlock)");
        let forbidden = v["forbidden"].as_array().unwrap();
        assert!(forbidden.len() >= 8);
        for a in forbidden {
            let errno = a["errno"].as_i64();
            assert!(
                errno == Some(13) || errno == Some(1),
                "{agent}: {} was not refused (errno {errno:?})",
                a["what"]
            );
        }
        let what: Vec<&str> = forbidden
            .iter()
            .map(|a| a["what"].as_str().unwrap())
            .collect();
        for must in [
            "socket(AF_INET, SOCK_STREAM)",
            "socket(AF_INET6, SOCK_STREAM)",
            "create a file in the temporary directory",
            "exec /bin/true",
        ] {
            assert!(what.contains(&must), "{agent}: {must} was not tried");
        }
        for a in v["allowed"].as_array().unwrap() {
            assert!(
                a["errno"].is_null(),
                "{agent}: {} should still work",
                a["what"]
            );
        }
    }
}
