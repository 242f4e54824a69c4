//! `nish-driver mcp-config --client NAME`: the exact configuration each MCP host needs to start
//! the shim, in that host's own format, with the host's call timeout raised above the longest
//! wait a call can have (the consent dialog, a host approval) where the host has such a setting.
//!
//! The config goes to standard output alone, so that it can be piped or pasted as it is; where
//! it goes and what to check go to standard error.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The longest a tool call of the driver waits, in seconds, with room to spare: the consent
/// dialog (60 s by default) or a host approval (60 s), plus the act itself. A host that gives
/// up earlier reports a timeout while the person is still reading the dialog.
pub const CALL_TIMEOUT_S: u64 = 300;

/// What a host that lists its servers with a description shows.
const DESCRIPTION: &str = "Read and operate your desktop apps, with your consent";

/// The name the driver takes in a host's list of servers.
pub const SERVER_NAME: &str = "nish-driver";

/// An MCP host the driver prints a configuration for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Code: a `claude mcp add` command line.
    ClaudeCode,
    /// Claude Desktop: `claude_desktop_config.json`.
    ClaudeDesktop,
    /// Codex CLI: `~/.codex/config.toml`.
    Codex,
    /// Cursor: `~/.cursor/mcp.json`.
    Cursor,
    /// VS Code: `mcp.json` (its `servers` shape).
    Vscode,
    /// Goose: `~/.config/goose/config.yaml`.
    Goose,
    /// LM Studio: `~/.lmstudio/mcp.json`.
    LmStudio,
    /// Gemini CLI: `~/.gemini/settings.json`.
    Gemini,
}

impl Client {
    /// Every host, in the order `--list` shows them.
    pub const ALL: [Client; 8] = [
        Client::ClaudeCode,
        Client::ClaudeDesktop,
        Client::Codex,
        Client::Cursor,
        Client::Vscode,
        Client::Goose,
        Client::LmStudio,
        Client::Gemini,
    ];

    /// The name `--client` takes.
    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::ClaudeDesktop => "claude-desktop",
            Client::Codex => "codex",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::Goose => "goose",
            Client::LmStudio => "lm-studio",
            Client::Gemini => "gemini",
        }
    }

    /// The host as people call it.
    pub fn title(self) -> &'static str {
        match self {
            Client::ClaudeCode => "Claude Code",
            Client::ClaudeDesktop => "Claude Desktop",
            Client::Codex => "Codex CLI",
            Client::Cursor => "Cursor",
            Client::Vscode => "VS Code",
            Client::Goose => "Goose",
            Client::LmStudio => "LM Studio",
            Client::Gemini => "Gemini CLI",
        }
    }
}

/// One host's configuration: what to print, and what to tell the person about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfig {
    /// The configuration itself (a command line, JSON, TOML or YAML).
    pub config: String,
    /// Where it goes and how the host's timeout is handled (one line each).
    pub notes: Vec<String>,
}

/// The configuration of `client` starting the shim at `shim`.
pub fn config(client: Client, shim: &Path) -> HostConfig {
    let shim_s = shim.to_string_lossy();
    let json_cmd = json_str(&shim_s);
    let timeout_ms = CALL_TIMEOUT_S * 1000;
    let no_timeout = |host: &str| {
        format!(
            "no per-server call timeout setting of {host} is known here: a call that waits longer \
             than {host}'s own limit (the consent dialog waits up to 60 s) fails in {host}"
        )
    };
    match client {
        Client::ClaudeCode => HostConfig {
            config: format!(
                "claude mcp add --scope user --transport stdio {SERVER_NAME} -- {}\n",
                sh_quote(&shim_s)
            ),
            notes: vec![
                "run this line once; `claude mcp list` then shows the server".into(),
                format!(
                    "Claude Code takes its tool call timeout from the environment: start it with \
                     MCP_TOOL_TIMEOUT={timeout_ms} (milliseconds), or put that variable in the \
                     \"env\" object of ~/.claude/settings.json"
                ),
            ],
        },
        Client::ClaudeDesktop => HostConfig {
            config: mcp_servers_json(&json_cmd, None),
            notes: vec![
                "merge into ~/.config/Claude/claude_desktop_config.json, then restart Claude \
                 Desktop"
                    .into(),
                no_timeout("Claude Desktop"),
            ],
        },
        Client::Codex => HostConfig {
            config: format!(
                "[mcp_servers.{SERVER_NAME}]\ncommand = {}\nargs = []\nstartup_timeout_sec = 20\n\
                 tool_timeout_sec = {CALL_TIMEOUT_S}\n",
                toml_str(&shim_s)
            ),
            notes: vec![
                "append to ~/.codex/config.toml (or a trusted project's .codex/config.toml)".into(),
                format!(
                    "tool_timeout_sec = {CALL_TIMEOUT_S} keeps Codex waiting while the person \
                     answers the consent dialog (its default is 60 s)"
                ),
            ],
        },
        Client::Cursor => HostConfig {
            config: mcp_servers_json(&json_cmd, None),
            notes: vec![
                "merge into ~/.cursor/mcp.json (or a project's .cursor/mcp.json)".into(),
                no_timeout("Cursor"),
            ],
        },
        Client::Vscode => HostConfig {
            config: format!(
                "{{\n  \"servers\": {{\n    \"{SERVER_NAME}\": {{\n      \"type\": \"stdio\",\n      \
                 \"command\": {json_cmd},\n      \"args\": []\n    }}\n  }}\n}}\n"
            ),
            notes: vec![
                "merge into the mcp.json of your VS Code profile (command: \"MCP: Open User \
                 Configuration\") or a workspace's .vscode/mcp.json"
                    .into(),
                no_timeout("VS Code"),
            ],
        },
        Client::Goose => HostConfig {
            config: format!(
                "extensions:\n  {SERVER_NAME}:\n    name: {SERVER_NAME}\n    type: stdio\n    \
                 cmd: {json_cmd}\n    args: []\n    envs: {{}}\n    enabled: true\n    \
                 timeout: {CALL_TIMEOUT_S}\n    description: \"{DESCRIPTION}\"\n"
            ),
            notes: vec![
                "merge under extensions: in ~/.config/goose/config.yaml".into(),
                format!("timeout: {CALL_TIMEOUT_S} is in seconds (Goose's default is 300)"),
            ],
        },
        Client::LmStudio => HostConfig {
            config: mcp_servers_json(&json_cmd, None),
            notes: vec![
                "merge into ~/.lmstudio/mcp.json (LM Studio: Program, Install, Edit mcp.json)"
                    .into(),
                no_timeout("LM Studio"),
            ],
        },
        Client::Gemini => HostConfig {
            config: mcp_servers_json(&json_cmd, Some(timeout_ms)),
            notes: vec![
                "merge into ~/.gemini/settings.json (or a project's .gemini/settings.json)".into(),
                format!("\"timeout\" is in milliseconds ({CALL_TIMEOUT_S} s)"),
            ],
        },
    }
}

/// The `mcpServers` shape most hosts share, with a `timeout` where the host reads one.
fn mcp_servers_json(json_cmd: &str, timeout_ms: Option<u64>) -> String {
    let mut s = format!(
        "{{\n  \"mcpServers\": {{\n    \"{SERVER_NAME}\": {{\n      \"command\": {json_cmd},\n      \
         \"args\": []"
    );
    if let Some(t) = timeout_ms {
        let _ = write!(s, ",\n      \"timeout\": {t}");
    }
    s.push_str("\n    }\n  }\n}\n");
    s
}

/// A JSON string (also a YAML double-quoted scalar: YAML reads JSON's escapes).
fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A word for a POSIX shell: as it is when it is plain, else in single quotes.
fn sh_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Where the shim is: `nish-mcp` beside this program (the package's `/usr/bin`, or
/// `~/.local/bin` after `install --user`), else the name alone for the host to find on its
/// `PATH`.
pub fn default_shim() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("nish-mcp")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("nish-mcp"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_odd_paths_whole() {
        assert_eq!(sh_quote("/usr/bin/nish-mcp"), "/usr/bin/nish-mcp");
        assert_eq!(sh_quote("/home/a b/it's"), "'/home/a b/it'\\''s'");
        assert_eq!(sh_quote(""), "''");
        assert_eq!(toml_str("a\"b\\c\u{1}"), "\"a\\\"b\\\\c\\u0001\"");
        assert_eq!(json_str("a\"b"), "\"a\\\"b\"");
    }

    #[test]
    fn every_host_has_a_config_that_names_the_shim() {
        for c in Client::ALL {
            let h = config(c, Path::new("/opt/x/nish-mcp"));
            assert!(h.config.contains("/opt/x/nish-mcp"), "{}", c.name());
            assert!(h.config.contains(SERVER_NAME), "{}", c.name());
            assert!(!h.notes.is_empty(), "{}", c.name());
        }
    }
}
