//! Fuzzes scenario parsing and validation: any text gives a scenario or a list of problems,
//! never a panic; a valid scenario's resolved form parses back to the same scenario.
#![no_main]

use libfuzzer_sys::fuzz_target;
use npqos_sim::scenario::Scenario;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(sc) = Scenario::parse(&text, "fuzz.toml", Path::new("/nonexistent")) {
        let again = Scenario::from_table(&sc.to_toml(), "resolved.toml", Path::new("/nonexistent"));
        assert_eq!(again.as_ref(), Ok(&sc), "resolved scenario must round-trip");
    }
});
