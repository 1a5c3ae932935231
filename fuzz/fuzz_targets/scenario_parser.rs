//! Fuzzes scenario parsing and validation: any text gives a scenario or a list of problems,
//! never a panic; a valid scenario's resolved form parses back to the same scenario.
//!
//! The first byte picks a model from `npqos_sim::models::MODELS` (the one list every front end
//! reads) and the rest is the scenario's body, so every model's reader is reached without the
//! fuzzer having to discover each `model = "..."` line; a body that sets `model` itself still
//! reaches the top-level checks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use npqos_sim::models::MODELS;
use npqos_sim::scenario::Scenario;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else { return };
    let body = String::from_utf8_lossy(body);
    let model = MODELS[pick as usize % MODELS.len()].name();
    for text in [format!("model = {model:?}\n{body}"), body.into_owned()] {
        if let Ok(sc) = Scenario::parse(&text, "fuzz.toml", Path::new("/nonexistent")) {
            let again = Scenario::from_table(&sc.to_toml(), "resolved.toml", Path::new("/nonexistent"));
            assert_eq!(again.as_ref(), Ok(&sc), "resolved scenario must round-trip");
        }
    }
});
