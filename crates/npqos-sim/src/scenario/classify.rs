//! Scenario keys of service classification rules (`npqos_core::classify`): a `[[services]]`
//! entry's `protocols`, `src_ports`, `dst_ports`, `ports`, `direction`, `src_prefixes`,
//! `dst_prefixes` and `dscp`, and a list of inside
//! prefixes; read with every problem under its key path, and written back for
//! `scenario.resolved.toml`.

use super::{show, Problem, Reader};
use npqos_core::classify::{Direction, PortRange, Prefix, Rule};
use npqos_core::id::ServiceId;

/// The keys of a rule, in the order they are written back.
pub(crate) const RULE_KEYS: [&str; 8] =
    ["protocols", "src_ports", "dst_ports", "ports", "direction", "src_prefixes", "dst_prefixes", "dscp"];

/// DSCP names a rule accepts beside numbers (RFC 2474 class selectors, RFC 2597 assured
/// forwarding, RFC 3246 expedited forwarding).
const DSCP_NAMES: [(&str, u8); 22] = [
    ("cs0", 0),
    ("cs1", 8),
    ("cs2", 16),
    ("cs3", 24),
    ("cs4", 32),
    ("cs5", 40),
    ("cs6", 48),
    ("cs7", 56),
    ("af11", 10),
    ("af12", 12),
    ("af13", 14),
    ("af21", 18),
    ("af22", 20),
    ("af23", 22),
    ("af31", 26),
    ("af32", 28),
    ("af33", 30),
    ("af41", 34),
    ("af42", 36),
    ("af43", 38),
    ("ef", 46),
    ("be", 0),
];

/// Protocol names a rule accepts beside numbers.
const PROTOCOLS: [(&str, u8); 4] = [("icmp", 1), ("tcp", 6), ("udp", 17), ("icmpv6", 58)];

/// Reads the rule keys of one `[[services]]` entry for service `service`.
pub(crate) fn read_rule(r: &mut Reader, service: ServiceId, probs: &mut Vec<Problem>) -> Rule {
    let protocols = list(
        r,
        "protocols",
        probs,
        "protocol numbers or names (\"tcp\", \"udp\", \"icmp\", \"icmpv6\")",
        |v| match v {
            toml::Value::Integer(i) => u8::try_from(*i).ok(),
            toml::Value::String(s) => PROTOCOLS.iter().find(|p| p.0 == s.to_ascii_lowercase()).map(|p| p.1),
            _ => None,
        },
    );
    let ports = |r: &mut Reader, key: &str, probs: &mut Vec<Problem>| {
        list(r, key, probs, "ports (0-65535) or ranges as \"8000-8099\"", port_range)
    };
    let src_ports = ports(r, "src_ports", probs);
    let dst_ports = ports(r, "dst_ports", probs);
    let either = ports(r, "ports", probs);
    let direction = match r.choice("direction", "any", &["any", "inbound", "outbound"], probs).as_str() {
        "inbound" => Direction::Inbound,
        "outbound" => Direction::Outbound,
        _ => Direction::Any,
    };
    let src_prefixes = read_prefixes(r, "src_prefixes", probs);
    let dst_prefixes = read_prefixes(r, "dst_prefixes", probs);
    let dscp = list(r, "dscp", probs, "DSCP values (0-63) or names (\"ef\", \"af41\", \"cs1\", ...)", |v| match v {
        toml::Value::Integer(i) => u8::try_from(*i).ok().filter(|&d| d <= 63),
        toml::Value::String(s) => DSCP_NAMES.iter().find(|p| p.0 == s.to_ascii_lowercase()).map(|p| p.1),
        _ => None,
    });
    Rule { service, protocols, src_ports, dst_ports, ports: either, direction, src_prefixes, dst_prefixes, dscp }
}

/// Whether a rule has any criterion (a rule without one matches every packet).
pub(crate) fn has_criteria(rule: &Rule) -> bool {
    !(rule.protocols.is_empty()
        && rule.src_ports.is_empty()
        && rule.dst_ports.is_empty()
        && rule.ports.is_empty()
        && rule.direction == Direction::Any
        && rule.src_prefixes.is_empty()
        && rule.dst_prefixes.is_empty()
        && rule.dscp.is_empty())
}

/// Reads a list of address prefixes (`["10.0.0.0/8", "2001:db8::/32"]`).
pub(crate) fn read_prefixes(r: &mut Reader, key: &str, probs: &mut Vec<Problem>) -> Vec<Prefix> {
    list(r, key, probs, "address prefixes as \"10.0.0.0/8\" or \"2001:db8::/32\"", |v| {
        v.as_str().and_then(|s| Prefix::parse(s).ok())
    })
}

/// Writes a rule's criteria back into a `[[services]]` table (none for a criterion left empty).
pub(crate) fn write_rule(rule: &Rule, t: &mut toml::Table) {
    let ints = |v: Vec<i64>| toml::Value::Array(v.into_iter().map(toml::Value::Integer).collect());
    if !rule.protocols.is_empty() {
        t.insert("protocols".into(), ints(rule.protocols.iter().map(|&p| p as i64).collect()));
    }
    for (key, ranges) in [("src_ports", &rule.src_ports), ("dst_ports", &rule.dst_ports), ("ports", &rule.ports)] {
        if !ranges.is_empty() {
            let v =
                ranges
                    .iter()
                    .map(|p| {
                        if p.lo == p.hi {
                            toml::Value::Integer(p.lo as i64)
                        } else {
                            format!("{}-{}", p.lo, p.hi).into()
                        }
                    })
                    .collect();
            t.insert(key.into(), toml::Value::Array(v));
        }
    }
    if !rule.dscp.is_empty() {
        t.insert("dscp".into(), ints(rule.dscp.iter().map(|&d| d as i64).collect()));
    }
    for (key, nets) in [("src_prefixes", &rule.src_prefixes), ("dst_prefixes", &rule.dst_prefixes)] {
        if !nets.is_empty() {
            t.insert(key.into(), write_prefixes(nets));
        }
    }
    match rule.direction {
        Direction::Any => {}
        Direction::Inbound => {
            t.insert("direction".into(), "inbound".into());
        }
        Direction::Outbound => {
            t.insert("direction".into(), "outbound".into());
        }
    }
}

/// Writes prefixes back as strings.
pub(crate) fn write_prefixes(prefixes: &[Prefix]) -> toml::Value {
    toml::Value::Array(prefixes.iter().map(|p| p.to_string().into()).collect())
}

fn port_range(v: &toml::Value) -> Option<PortRange> {
    match v {
        toml::Value::Integer(i) => u16::try_from(*i).ok().map(PortRange::one),
        toml::Value::String(s) => {
            let (a, b) = s.split_once('-')?;
            let (lo, hi) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
            (lo <= hi).then_some(PortRange { lo, hi })
        }
        _ => None,
    }
}

/// A list under `key`, each element through `parse`; every bad element is a problem at
/// `key[i]`. An absent key is the empty list.
fn list<T>(
    r: &mut Reader,
    key: &str,
    probs: &mut Vec<Problem>,
    expected: &str,
    parse: impl Fn(&toml::Value) -> Option<T>,
) -> Vec<T> {
    let path = r.path(key);
    match r.value(key) {
        None => Vec::new(),
        Some(toml::Value::Array(a)) => a
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                let x = parse(v);
                if x.is_none() {
                    probs.push(Problem {
                        key: format!("{path}[{i}]"),
                        value: Some(show(v)),
                        message: format!("expected {expected}"),
                    });
                }
                x
            })
            .collect(),
        Some(v) => {
            probs.push(Problem {
                key: path,
                value: Some(show(v)),
                message: format!("expected an array of {expected}"),
            });
            Vec::new()
        }
    }
}

/// Refuses a `[[services]]` name that an earlier service already has (it names result columns
/// such as `offered_packets.<name>`, so two of one name would merge or repeat rows), naming
/// the later one's key. The everest and router models' services both go through it.
pub(crate) fn unique_service_names<'a>(names: impl IntoIterator<Item = &'a str>, probs: &mut Vec<Problem>) {
    let names: Vec<&str> = names.into_iter().collect();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            probs.push(Problem {
                key: format!("services[{i}].name"),
                value: Some(format!("{name:?}")),
                message: "expected a name no other service has".into(),
            });
        }
    }
}
