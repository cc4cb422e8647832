//! The reference server (@modelcontextprotocol/server-everything) for the tests: found where
//! `.ci/mcp-server.sh` installs it (or at `KEEL_MCP_SERVER`), started over stdio or streamable
//! HTTP on 127.0.0.1. Missing, a test is skipped with a message, except in CI (`CI` or
//! `KEEL_REQUIRE_MCP_SERVER` set), where it fails.

#![allow(dead_code)]

pub mod runs;

use std::path::Path;
use std::time::Duration;

/// The server's entry script, or `None` (skip) outside CI.
pub fn server_script() -> Option<String> {
    let required = ["CI", "KEEL_REQUIRE_MCP_SERVER"].iter().any(|v| std::env::var(v).is_ok_and(|s| !s.is_empty() && s != "false" && s != "0"));
    let path = match std::env::var("KEEL_MCP_SERVER") {
        Ok(p) => p,
        Err(_) => concat!(env!("CARGO_MANIFEST_DIR"), "/../target/mcp-server/node_modules/@modelcontextprotocol/server-everything/dist/index.js").to_owned(),
    };
    let node = std::process::Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if Path::new(&path).is_file() && node {
        return Some(path);
    }
    let why = if node { format!("the MCP reference server is not installed at {path}") } else { "node is not installed".to_owned() };
    if required {
        panic!("{why}: run `bash .ci/mcp-server.sh` (needs node >= 20 and npm) and set KEEL_MCP_SERVER to the path it prints");
    }
    eprintln!("skipped: {why} (run `bash .ci/mcp-server.sh`; in CI this fails)");
    None
}

/// The server in streamable-HTTP mode on a free port of 127.0.0.1, killed on drop.
pub struct HttpServer {
    pub child: tokio::process::Child,
    pub url: String,
}

impl HttpServer {
    pub async fn start(script: &str) -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let child = tokio::process::Command::new("node")
            .args([script, "streamableHttp"])
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the streamable-HTTP server");
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return HttpServer { child, url: format!("http://127.0.0.1:{port}/mcp") };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the streamable-HTTP server did not listen on 127.0.0.1:{port} within 20 s");
    }
}

/// Kills a process we started (SIGKILL: no goodbye to the client).
pub fn kill(pid: u32) {
    let status = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().expect("run kill");
    assert!(status.success(), "kill -9 {pid} failed");
}
