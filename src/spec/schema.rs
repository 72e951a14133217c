//! The JSON Schema (Draft 7) of spec files, generated from the model types, for editors
//! (Taplo / Even Better TOML: `#:schema ./driftless.schema.json`).

use schemars::generate::SchemaSettings;

use super::model::SpecFile;

/// Where the committed copy lives, relative to the repository root.
pub const COMMITTED_PATH: &str = "schema/driftless.schema.json";

pub fn generate() -> Result<String, serde_json::Error> {
    let generator = SchemaSettings::draft07().into_generator();
    let schema = generator.into_root_schema_for::<SpecFile>();
    let mut text = serde_json::to_string_pretty(&schema)?;
    text.push('\n');
    Ok(text)
}
