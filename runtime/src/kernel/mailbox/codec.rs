//! Mailbox wire form: `{"records":[record…],"cursor":n}` for a whole history (record `i`
//! arrived `i`-th), or, once compaction dropped records, `{"records":[…],"cursor":n,
//! "admitted":m}` where every consumed record carries its `arrival` (pending records are the
//! arrivals after the cursor, so theirs is implied). `admitted` is present exactly when records
//! were dropped, so an uncompacted mailbox keeps the bytes it always had and every mailbox has
//! one encoding. Decoding replays the history ([`Mailbox::from_retained`]), so a decoded
//! mailbox always satisfies every history rule.

use super::record::SignalRecord;
use super::Mailbox;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, ToJson, WriteJson};

impl ToJson for Mailbox {
    fn to_json(&self) -> Json {
        let compacted = self.is_compacted();
        let records: Vec<Json> = self
            .records()
            .iter()
            .map(|r| r.encode((compacted && r.is_consumed()).then_some(r.arrival())))
            .collect();
        ObjectBuilder::new()
            .value("records", Json::Array(records))
            .field("cursor", &self.cursor())
            .opt_field("admitted", compacted.then_some(self.len()).as_ref())
            .build()
    }
}

/// The same bytes as the tree above, written directly (pending payloads copied from their
/// stored canonical text).
impl WriteJson for Mailbox {
    fn write_json(&self, out: &mut String) {
        let compacted = self.is_compacted();
        let mut w = ObjectWriter::new(out);
        if compacted {
            w.u64("admitted", self.len());
        }
        w.u64("cursor", self.cursor());
        let records = w.key("records");
        records.push('[');
        for (i, r) in self.records().iter().enumerate() {
            if i > 0 {
                records.push(',');
            }
            r.write_encoded(records, (compacted && r.is_consumed()).then_some(r.arrival()));
        }
        records.push(']');
        w.finish();
    }
}

impl FromJson for Mailbox {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let items: &Json = r.required_value("records")?;
        let cursor: u64 = r.required("cursor")?;
        let admitted: Option<u64> = r.optional("admitted")?;
        r.finish()?;
        let Json::Array(items) = items else { return Err(DecodeError::wrong_type("array", items)) };
        let mut records = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let (record, arrival) = SignalRecord::decode(item).map_err(|e| e.in_index(i).in_member("records"))?;
            records.push((record, arrival));
        }
        let invalid = |e: super::MailboxError| DecodeError::invalid(e.to_string());
        let Some(admitted) = admitted else {
            if records.iter().any(|(_, a)| a.is_some()) {
                return Err(DecodeError::invalid("a mailbox without `admitted` carries no record arrivals"));
            }
            return Mailbox::from_records(records.into_iter().map(|(r, _)| r).collect(), cursor).map_err(invalid);
        };
        if admitted == records.len() as u64 {
            return Err(DecodeError::invalid("`admitted` is present only when records were dropped"));
        }
        // Pending records are the last `admitted - cursor` arrivals, in order.
        let pending = admitted.saturating_sub(cursor);
        let first_pending = (records.len() as u64).saturating_sub(pending) as usize;
        let mut placed = Vec::with_capacity(records.len());
        for (i, (mut record, arrival)) in records.into_iter().enumerate() {
            let arrival = match (record.is_consumed(), arrival) {
                (true, Some(a)) => a,
                (false, None) => cursor + 1 + (i as u64).saturating_sub(first_pending as u64),
                (true, None) => return Err(DecodeError::invalid("a consumed record of a compacted mailbox needs its `arrival`")),
                (false, Some(_)) => return Err(DecodeError::invalid("a pending record's arrival is implied, never written")),
            };
            record.set_arrival(arrival);
            placed.push(record);
        }
        Mailbox::from_retained(placed, cursor, admitted).map_err(invalid)
    }
}
