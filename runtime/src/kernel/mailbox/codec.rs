//! Mailbox wire form: `{"records":[record…],"cursor":n}`. Decoding replays the history
//! ([`Mailbox::from_records`]), so a decoded mailbox always satisfies every history rule.

use super::record::SignalRecord;
use super::Mailbox;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};

impl ToJson for Mailbox {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("records", self.records())
            .field("cursor", &self.cursor())
            .build()
    }
}

impl FromJson for Mailbox {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let records: Vec<SignalRecord> = r.required("records")?;
        let cursor: u64 = r.required("cursor")?;
        r.finish()?;
        Mailbox::from_records(records, cursor).map_err(|e| DecodeError::invalid(e.to_string()))
    }
}
