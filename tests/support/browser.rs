//! A real headless Chromium, driven over WebDriver by `chromedriver` on a loopback port,
//! for the web UI tests.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tempfile::TempDir;

use super::{WAIT, free_port, tail};

/// Debian's `chromium` package.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// One browser session; chromedriver and every Chromium process it started are killed on
/// drop, so a failing test leaves nothing behind.
pub struct Browser {
    pub client: Client,
    driver: Child,
    dir: TempDir,
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Truthy as JavaScript sees it, for what `wait_for` scripts return.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

impl Browser {
    /// Starts chromedriver and a fresh Chromium profile with a 1280×1000 window.
    pub async fn start() -> Browser {
        Self::start_with(&[]).await
    }

    /// `start`, the system asking pages for their dark colours (`prefers-color-scheme:
    /// dark`), as a person's dark desktop does.
    pub async fn start_dark() -> Browser {
        Self::start_with(&["--blink-settings=preferredColorScheme=0"]).await
    }

    /// `start` with more Chromium switches.
    pub async fn start_with(switches: &[&str]) -> Browser {
        let driver = on_path("chromedriver");
        let (Some(driver), true) = (driver, Path::new(CHROMIUM).is_file()) else {
            panic!(
                "the web UI tests need Debian's chromium and chromium-driver ({CHROMIUM} and \
                 chromedriver on PATH); testbed/install.sh installs them"
            );
        };
        let dir = TempDir::new().unwrap();
        let port = free_port();
        let log = File::create(dir.path().join("chromedriver.log")).unwrap();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            // Its own process group: Chromium's processes join it, and `Drop` ends them all.
            .process_group(0)
            .spawn()
            .expect("start chromedriver");
        let mut driver = child;
        let client = Self::connect(port, &dir, &mut driver, switches).await;
        let browser = Browser {
            client,
            driver,
            dir,
        };
        if let Err(e) = browser.client.set_window_size(1280, 1000).await {
            panic!("resizing the window: {e}\n{}", browser.driver_log());
        }
        browser
    }

    async fn connect(port: u16, dir: &TempDir, driver: &mut Child, switches: &[&str]) -> Client {
        let profile = dir.path().join("profile");
        let mut args: Vec<String> = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ]
        .iter()
        .chain(switches)
        .map(|s| s.to_string())
        .collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": args,
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let attempt = ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await;
            let exited = driver.try_wait().ok().flatten();
            match attempt {
                Ok(client) => return client,
                Err(e) if exited.is_some() || tokio::time::Instant::now() >= deadline => panic!(
                    "no WebDriver session from chromedriver on {url}: {e}\n{}",
                    std::fs::read_to_string(dir.path().join("chromedriver.log"))
                        .unwrap_or_default()
                ),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    fn driver_log(&self) -> String {
        let text =
            std::fs::read_to_string(self.dir.path().join("chromedriver.log")).unwrap_or_default();
        tail(&text, 4000).to_string()
    }

    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("opening {url}: {e}"));
    }

    /// Runs `script` (a function body; `return` gives the value) in the page.
    pub async fn eval(&self, script: &str) -> Value {
        self.eval_with(script, vec![]).await
    }

    /// `eval` with `arguments[0]`, `arguments[1]`...
    pub async fn eval_with(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// What a person sees of the page (or of one element): its rendered text.
    pub async fn text(&self, css: &str) -> String {
        let found = self.find(css).await;
        found.text().await.unwrap_or_default()
    }

    pub async fn find(&self, css: &str) -> Element {
        match self.client.find(Locator::Css(css)).await {
            Ok(element) => element,
            Err(e) => panic!("no element {css}: {e}\n{}", self.page_text().await),
        }
    }

    /// Clicks what `css` names, once the page shows it. A page just loaded draws what it
    /// fetched a moment later, and a live page may redraw the element between finding and
    /// clicking it (WebDriver's "stale element reference"); a person would wait for it, or
    /// click the new one, so the element is looked for again, within `WAIT`.
    pub async fn click(&self, css: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let element = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element,
                Err(e) if e.is_no_such_element() && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) => panic!("no element {css}: {e}\n{}", self.page_text().await),
            };
            match element.click().await {
                Ok(()) => return,
                Err(e)
                    if e.is_stale_element_reference() && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("clicking {css}: {e}"),
            }
        }
    }

    /// Types `text` into an input, as a person would.
    pub async fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        element
            .send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("typing into {css}: {e}"));
    }

    /// Presses `keys` where the focus is (the page itself when nothing has it), as a
    /// person's keyboard would.
    pub async fn press(&self, keys: &str) {
        let focused = self
            .client
            .active_element()
            .await
            .unwrap_or_else(|e| panic!("the focused element: {e}"));
        focused
            .send_keys(keys)
            .await
            .unwrap_or_else(|e| panic!("pressing {keys:?}: {e}"));
    }

    pub async fn page_text(&self) -> String {
        match self
            .client
            .execute("return document.body.innerText", vec![])
            .await
        {
            Ok(Value::String(s)) => s,
            other => format!("(no page text: {other:?})"),
        }
    }

    /// Polls `script` with `args` until it returns something truthy (within `WAIT`), and
    /// returns it; on timeout, fails with what the page shows.
    pub async fn wait_for(&self, what: &str, script: &str, args: Vec<Value>) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let value = self.eval_with(script, args.clone()).await;
            if truthy(&value) {
                return value;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "timed out after {WAIT:?} waiting for {what}; the page shows:\n{}",
                    self.page_text().await
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until the rendered text of the element `css` contains every one of
    /// `needles`, and returns that text.
    pub async fn wait_for_text(&self, css: &str, needles: &[&str]) -> String {
        let script = "const e = document.querySelector(arguments[0]); \
                      const t = e ? e.innerText : ''; \
                      return arguments[1].every(n => t.includes(n)) ? t : null;";
        let what = format!("{needles:?} in {css}");
        let found = self
            .wait_for(&what, script, vec![json!(css), json!(needles)])
            .await;
        found.as_str().unwrap_or_default().to_string()
    }

    pub async fn screenshot(&self, path: &Path) {
        let png = self
            .client
            .screenshot()
            .await
            .unwrap_or_else(|e| panic!("screenshot: {e}"));
        std::fs::write(path, png).unwrap();
    }

    /// The ids of the spec list's rows shown, in order.
    pub async fn spec_rows(&self) -> Vec<String> {
        let ids = self
            .eval("return [...document.querySelectorAll('#spec-rows tr[data-id]')].map(r => r.dataset.id)")
            .await;
        serde_json::from_value(ids).unwrap()
    }

    /// Waits until the spec list shows `n` rows.
    pub async fn wait_for_spec_rows(&self, n: usize) {
        self.wait_for(
            &format!("{n} rows"),
            "return document.querySelectorAll('#spec-rows tr[data-id]').length === arguments[0]",
            vec![json!(n)],
        )
        .await;
    }

    /// Asserts the page does not scroll sideways (`scrollWidth <= clientWidth`).
    pub async fn assert_no_sideways_scroll(&self, what: &str) {
        let widths = self
            .eval(
                "const d = document.documentElement; \
                 return [d.scrollWidth, d.clientWidth, document.body.scrollWidth];",
            )
            .await;
        let [scroll, client, body] = [0, 1, 2].map(|i| widths[i].as_u64().unwrap());
        assert!(
            scroll <= client && body <= client,
            "{what}: the page scrolls sideways: scrollWidth {scroll} (body {body}) > clientWidth {client}"
        );
    }

    /// Every shown element's own text whose colour on its background (the nearest
    /// opaque one behind it) has a contrast under WCAG's 4.5:1, as rendered: one line
    /// each, naming the element, its colours and the ratio.
    pub async fn low_contrast(&self) -> Vec<String> {
        let found = self
            .eval(
                "const channels = (c) => c.match(/[\\d.]+/g).map(Number);\
                 const lum = (c) => { const [r, g, b] = channels(c).slice(0, 3).map((v) => { v /= 255;\
                   return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });\
                   return 0.2126 * r + 0.7152 * g + 0.0722 * b; };\
                 const opaque = (c) => { const p = channels(c); return p.length < 4 || p[3] > 0.5; };\
                 const behind = (e) => { for (; e; e = e.parentElement) { const c = getComputedStyle(e).backgroundColor;\
                   if (opaque(c)) return c; } return 'rgb(255, 255, 255)'; };\
                 const low = [];\
                 for (const e of document.body.querySelectorAll('*')) {\
                   if (!e.getClientRects().length || getComputedStyle(e).visibility !== 'visible') continue;\
                   if (![...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;\
                   const fg = getComputedStyle(e).color, bg = behind(e);\
                   const [hi, lo] = [lum(fg), lum(bg)].sort((x, y) => y - x);\
                   const ratio = (hi + 0.05) / (lo + 0.05);\
                   if (ratio < 4.5) low.push(`${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}${e.className ? '.' + e.className : ''} \
                     '${e.textContent.trim().slice(0, 40)}': ${fg} on ${bg}: ${ratio.toFixed(2)}:1`);\
                 }\
                 return low;",
            )
            .await;
        serde_json::from_value(found).unwrap()
    }

    /// `DRIFTLESS_UI_SCREENSHOT_DIR=DIR` keeps the views' screenshots in DIR.
    pub async fn shot(&self, name: &str) {
        if let Some(dir) = std::env::var_os("DRIFTLESS_UI_SCREENSHOT_DIR") {
            self.screenshot(&Path::new(&dir).join(name)).await;
        }
    }

    /// Ends the session (Chromium exits), then chromedriver.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The whole group: chromedriver and the Chromium it started.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver.id())])
            .status();
        let _ = self.driver.wait();
    }
}

/// `spec=…&object=…` as the page's URLSearchParams writes it.
pub fn url_params(spec: &str, object: &str) -> String {
    format!("spec={}&object={}", form(spec), form(object))
}

/// application/x-www-form-urlencoded, as URLSearchParams encodes.
pub fn form(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                (b as char).to_string()
            }
            b' ' => "+".to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Percent-encoding for a URL's query (a space as `%20`).
pub fn urlencode(s: &str) -> String {
    form(s).replace('+', "%20")
}
