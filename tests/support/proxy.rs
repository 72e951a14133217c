//! Debian's real `tinyproxy` on loopback: the HTTP proxy a registry is reached through
//! when HTTPS_PROXY / HTTP_PROXY name it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct TestProxy {
    child: Option<Child>,
    log: PathBuf,
    pub port: u16,
}

impl TestProxy {
    pub fn start(dir: &Path) -> TestProxy {
        std::fs::create_dir_all(dir).unwrap();
        let port = super::free_port();
        let log = dir.join("tinyproxy.log");
        let config = dir.join("tinyproxy.conf");
        // No ConnectPort line: CONNECT to any port (the registries' are not 443).
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListen 127.0.0.1\nTimeout 60\nLogFile \"{}\"\nLogLevel Info\n\
                 MaxClients 50\nAllow 127.0.0.1\nDisableViaHeader Yes\n",
                log.display()
            ),
        )
        .unwrap();
        let child = Command::new("tinyproxy")
            .arg("-d")
            .arg("-c")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tinyproxy (testbed/install.sh installs it)");
        let child = super::await_ready(child, Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .expect("tinyproxy did not start");
        TestProxy {
            child: Some(child),
            log,
            port,
        }
    }

    /// `http://127.0.0.1:PORT`, as HTTPS_PROXY names it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The CONNECT requests it was asked so far (`HOST:PORT` each).
    pub fn tunnels(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let at = l.find("): CONNECT ")? + "): CONNECT ".len();
                l[at..].split_whitespace().next().map(str::to_string)
            })
            .collect()
    }
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
