//! Fuzzes the pcap / pcapng reader and the link-layer decoder, strict and lenient: any input
//! must give records or an error, never a panic, an unbounded allocation or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use npqos_sim::trace::decode::decode;
use npqos_sim::trace::TraceReader;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    for lenient in [false, true] {
        let Ok(mut r) = TraceReader::new(data, Path::new("fuzz.pcap"), lenient) else { continue };
        let mut n = 0usize;
        while let Ok(Some(rec)) = r.next() {
            let _ = decode(&rec);
            n += 1;
            assert!(n <= data.len(), "more records than input bytes");
        }
    }
});
