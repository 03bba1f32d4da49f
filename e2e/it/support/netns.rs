//! Network namespaces for tests of several hosts: each [`Host`] is a namespace (`ip netns`)
//! with a veth pair to the test's own namespace, the test's side `10.<a>.<b>.1/24`, the
//! host's `10.<a>.<b>.2/24`, so a process started in it ([`Host::wrapper`]) reaches servers
//! the test binds on the test's side, and [`Host::cut`] takes the link down. Needs root and
//! `ip` (iproute2); [`available`] says whether this machine has both. Removed on drop.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether namespaces can be made here (root, iproute2): one is made and removed.
pub(crate) fn available() -> bool {
    let name = format!("sluiceprobe{}", std::process::id());
    let made = ip(&["netns", "add", &name]);
    if made {
        ip(&["netns", "del", &name]);
    }
    made
}

pub(crate) struct Host {
    name: String,
    outside: String,
    /// The test's side of the link: servers for this host bind here.
    pub(crate) gateway: String,
    /// The host's side: a server the host runs binds here to be reached from the test.
    pub(crate) address: String,
}

impl Host {
    /// A new namespace linked to the test's; panics when `ip` refuses.
    pub(crate) fn new() -> Host {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        let name = format!("sluice{pid}n{n}");
        let (outside, inside) = (
            format!("sl{}o{n}", pid % 100_000),
            format!("sl{}i{n}", pid % 100_000),
        );
        let subnet = format!("10.{}.{}", 100 + (pid % 100), n);
        let gateway = format!("{subnet}.1");
        let host = Host {
            name: name.clone(),
            outside: outside.clone(),
            gateway: gateway.clone(),
            address: format!("{subnet}.2"),
        };
        let inns = |args: &[&str]| {
            let mut all = vec!["netns", "exec", name.as_str(), "ip"];
            all.extend_from_slice(args);
            assert!(ip(&all), "ip {all:?}");
        };
        for args in [
            vec!["netns", "add", name.as_str()],
            vec![
                "link", "add", &outside, "type", "veth", "peer", "name", &inside,
            ],
            vec!["link", "set", &inside, "netns", &name],
            vec!["addr", "add", &format!("{gateway}/24"), "dev", &outside],
            vec!["link", "set", &outside, "up"],
        ] {
            assert!(ip(&args), "ip {args:?}");
        }
        inns(&[
            "addr",
            "add",
            &format!("{}/24", host.address),
            "dev",
            &inside,
        ]);
        inns(&["link", "set", &inside, "up"]);
        inns(&["link", "set", "lo", "up"]);
        host
    }

    /// The command prefix that runs a program in this namespace.
    pub(crate) fn wrapper(&self) -> Vec<String> {
        ["ip", "netns", "exec", &self.name]
            .map(str::to_string)
            .to_vec()
    }

    /// Takes the link down: the host can reach nothing outside, nothing reaches it.
    pub(crate) fn cut(&self) {
        assert!(ip(&["link", "set", &self.outside, "down"]), "link down");
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // Deleting the namespace deletes its end of the pair, and with it ours.
        ip(&["netns", "del", &self.name]);
        ip(&["link", "del", &self.outside]);
    }
}
