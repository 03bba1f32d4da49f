//! Test inputs that use nothing else of `support/` (only std, tokio and the text they build), so
//! that the benches (`e2e/bench`) and the fuzz targets (`e2e/fuzz`) include this file by path
//! too: one copy of each for all three.

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The lines of the canary `shop/web` at `revision` up to its route: route-only over an SMI
/// TrafficSplit of web-blue and web-green.
pub fn web_head(revision: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata: {{name: web, namespace: shop}}
spec:
  routeOnly: {{services: [web-blue, web-green], revision: \"{revision}\"}}
  service: {{port: 8080}}
  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}
"
    )
}

/// A ConfigMap `big` in `namespace` of exactly `bytes` bytes: one long list of keys, under the
/// parser's bound on nodes (100,000), so that it parses (and costs what parsing that many bytes
/// costs).
pub fn big_config_map(namespace: &str, bytes: usize) -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big, namespace: {namespace}}}\ndata:\n"
    );
    let value = "v".repeat(120);
    let mut i = 0;
    while text.len() + 160 < bytes {
        text.push_str(&format!("  key{i:08}: {value}\n"));
        i += 1;
    }
    // Padded to the byte in a comment.
    text.push('#');
    while text.len() < bytes {
        text.push('x');
    }
    text
}

/// Reads from `stream` up to the end of one request head (no body), keeping what follows it in
/// `buf` for the next request; `false` when the client closed the connection (or it failed)
/// first.
pub async fn read_request_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    buf.drain(..end);
    true
}
