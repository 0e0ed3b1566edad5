//! Request charges, routed through one trait so the demo's table can carry
//! them before the engine reports them.
//!
//! Every request the demo makes returns one of the response types below, and
//! every access pattern adds up its requests' charges in a [`Charge`]. Today
//! no response carries a charge, so [`RequestCharge::request_charge`] is
//! `None` for all of them and the table prints "n/a": an honest gap, not a
//! made-up figure. When the engine reports charges, the impls in this file
//! are the only code to change.

use partita::{Document, ItemResponse, ProcedureResponse, QueryPage};

/// A response that may report what it cost, in request units.
pub(crate) trait RequestCharge {
    /// The request charge, when the engine reports one.
    fn request_charge(&self) -> Option<f64>;
}

impl RequestCharge for Document {
    fn request_charge(&self) -> Option<f64> {
        None
    }
}

impl RequestCharge for QueryPage {
    fn request_charge(&self) -> Option<f64> {
        None
    }
}

impl RequestCharge for ProcedureResponse {
    fn request_charge(&self) -> Option<f64> {
        None
    }
}

impl RequestCharge for ItemResponse {
    fn request_charge(&self) -> Option<f64> {
        None
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
