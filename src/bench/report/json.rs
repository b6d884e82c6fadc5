//! JSON for machines: the [`Report`] serialized as it is, pretty-printed,
//! every raw run kept; `schema_version` says which layout it is.

use super::{Exporter, Report};
use crate::bench::BenchError;

pub struct Json;

impl Exporter for Json {
    fn export(&self, report: &Report) -> Result<String, BenchError> {
        let mut json = serde_json::to_string_pretty(report)
            .map_err(|e| BenchError::msg(format!("encoding JSON: {e}")))?;
        json.push('\n');
        Ok(json)
    }
}
