#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ddx::fuzzing::upload_record(data));
