//! Request charges of the demo's requests, from the deterministic formula
//! of `partita::charge` that every response of the command line and the
//! library uses.
//!
//! Every request the demo makes returns one of the response types below, and
//! every access pattern adds up its requests' charges in a [`Charge`]. A
//! point operation returns a bare [`Document`], which does not say whether
//! it was read or written, so the demo wraps it in [`Read`] or [`Written`].

use partita::charge::Work;
use partita::{Document, ItemResponse, ProcedureResponse, QueryPage};

/// A response that reports what it cost, in request units.
pub(crate) trait RequestCharge {
    /// The request charge (`None` when unknown; every response here knows).
    fn request_charge(&self) -> Option<f64>;
}

/// A document returned by a point read.
pub(crate) struct Read<'a>(pub(crate) &'a Document);

/// A document returned by a point create, replace or upsert.
pub(crate) struct Written<'a>(pub(crate) &'a Document);

/// The document's size as the charge counts it: its JSON text.
fn size(doc: &Document) -> u64 {
    serde_json::to_vec(doc.value()).map_or(0, |v| v.len() as u64)
}

impl RequestCharge for Read<'_> {
    fn request_charge(&self) -> Option<f64> {
        Some(Work::point_read(size(self.0)).request_charge())
    }
}

impl RequestCharge for Written<'_> {
    fn request_charge(&self) -> Option<f64> {
        Some(Work::point_write(size(self.0)).request_charge())
    }
}

impl RequestCharge for QueryPage {
    fn request_charge(&self) -> Option<f64> {
        Some(Work::query(&self.stats).request_charge())
    }
}

impl RequestCharge for ProcedureResponse {
    fn request_charge(&self) -> Option<f64> {
        Some(self.stats.request_charge())
    }
}

impl RequestCharge for ItemResponse {
    fn request_charge(&self) -> Option<f64> {
        Some(self.stats.request_charge())
    }
}

/// The summed charge of the requests of one access pattern: `None` as soon
/// as one request did not report its charge (a partial sum would understate
/// the cost).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Charge(Option<f64>);

impl Charge {
    /// No request yet.
    pub(crate) fn zero() -> Charge {
        Charge(Some(0.0))
    }

    /// Adds one response's charge.
    pub(crate) fn add(&mut self, response: &impl RequestCharge) {
        self.add_units(response.request_charge());
    }

    /// Adds a charge (`None`: unknown).
    pub(crate) fn add_units(&mut self, units: Option<f64>) {
        self.0 = match (self.0, units) {
            (Some(sum), Some(units)) => Some(sum + units),
            _ => None,
        };
    }

    /// The sum, or `None` when some request's charge is unknown.
    pub(crate) fn units(self) -> Option<f64> {
        self.0
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
        assert_eq!(charge.units(), Some(3.5));
        charge.add_units(None);
        charge.add_units(Some(1.0));
        assert_eq!(charge.units(), None);
    }
}
