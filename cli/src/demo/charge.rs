//! Request charges of the demo's requests, from the deterministic formula
//! of `partita::charge` that every response of the command line and the
//! library uses.
//!
//! Every request the demo makes returns one of the response types below, and
//! every access pattern adds up its requests' charges in a [`Charge`]. A
//! point operation returns a bare [`Document`], which does not say whether
//! it was read or written, so the demo tells [`Charge::read`] or
//! [`Charge::written`]. A document's charge depends on its size, which the
//! response does not carry: the [`Charge`] keeps the (shared, not copied)
//! document and measures it in [`Charge::units`], after the request has been
//! timed, so the latency column does not include serializing it.

use partita::charge::Work;
use partita::{BatchResponse, Document, ItemResponse, ProcedureResponse, QueryPage};

/// A response that reports what it cost, in request units.
pub(crate) trait RequestCharge {
    /// The request charge (`None` when unknown; every response here knows).
    fn request_charge(&self) -> Option<f64>;
}

/// The document's size as the charge counts it: its JSON text.
fn size(doc: &Document) -> u64 {
    serde_json::to_vec(doc.value()).map_or(0, |v| v.len() as u64)
}

impl RequestCharge for QueryPage {
    fn request_charge(&self) -> Option<f64> {
        Some(Work::query(&self.stats).request_charge())
    }
}

impl RequestCharge for ProcedureResponse {
    fn request_charge(&self) -> Option<f64> {
        Some(partita::charge::Work::call(&self.stats).request_charge())
    }
}

impl RequestCharge for ItemResponse {
    fn request_charge(&self) -> Option<f64> {
        Some(partita::charge::Work::call(&self.stats).request_charge())
    }
}

impl RequestCharge for BatchResponse {
    fn request_charge(&self) -> Option<f64> {
        Some(
            self.results
                .iter()
                .map(partita::charge::batch_operation)
                .sum(),
        )
    }
}

/// The summed charge of the requests of one access pattern: `None` as soon
/// as one request did not report its charge (a partial sum would understate
/// the cost).
#[derive(Clone, Debug)]
pub(crate) struct Charge {
    sum: Option<f64>,
    /// Point reads (`false`) and writes (`true`), measured in `units`.
    documents: Vec<(Document, bool)>,
}

impl Charge {
    /// No request yet.
    pub(crate) fn zero() -> Charge {
        Charge {
            sum: Some(0.0),
            documents: Vec::new(),
        }
    }

    /// Adds a point read that returned `doc`.
    pub(crate) fn read(&mut self, doc: &Document) {
        self.documents.push((doc.clone(), false));
    }

    /// Adds a point create, replace or upsert that returned `doc`.
    pub(crate) fn written(&mut self, doc: &Document) {
        self.documents.push((doc.clone(), true));
    }

    /// Adds one response's charge.
    pub(crate) fn add(&mut self, response: &impl RequestCharge) {
        self.add_units(response.request_charge());
    }

    /// Adds a charge (`None`: unknown).
    pub(crate) fn add_units(&mut self, units: Option<f64>) {
        self.sum = match (self.sum, units) {
            (Some(sum), Some(units)) => Some(sum + units),
            _ => None,
        };
    }

    /// The sum, or `None` when some request's charge is unknown.
    pub(crate) fn units(mut self) -> Option<f64> {
        for (doc, written) in std::mem::take(&mut self.documents) {
            let work = if written {
                Work::point_write(size(&doc))
            } else {
                Work::point_read(size(&doc))
            };
            self.add_units(Some(work.request_charge()));
        }
        self.sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_unknown_charge_makes_the_sum_unknown() {
        let mut charge = Charge::zero();
        charge.add_units(Some(1.5));
        charge.add_units(Some(2.0));
        assert_eq!(charge.clone().units(), Some(3.5));
        charge.add_units(None);
        charge.add_units(Some(1.0));
        assert_eq!(charge.units(), None);
    }

    #[test]
    fn documents_are_charged_by_size_when_summed() {
        let doc = Document::new(serde_json::json!({"id": "u1", "name": "x".repeat(1000)}));
        let mut charge = Charge::zero();
        charge.read(&doc);
        charge.written(&doc);
        let bytes = serde_json::to_vec(doc.value()).unwrap().len() as u64;
        let expected =
            Work::point_read(bytes).request_charge() + Work::point_write(bytes).request_charge();
        assert_eq!(charge.units(), Some(expected));
    }
}
