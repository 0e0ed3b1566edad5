//! Offers (`/offers[/{rid}]`): the throughput a client provisioned for a
//! database or container, manual (`x-ms-offer-throughput`) or autoscale
//! (`x-ms-cosmos-offer-autopilot-settings`), given when it is created and
//! read, queried and replaced here afterwards.
//!
//! Partita does not throttle: an offer is validated as the service
//! validates it, stored in the registry beside its owner (`registry.rs`)
//! and echoed, and nothing else reads it. A database or container created
//! without a throughput header has no offer.
//!
//! ```text
//!   {"id": "AAAE", "_rid": "AAAE", "_self": "offers/AAAE/", "_etag", "_ts",
//!    "offerVersion": "V2", "offerType": "Invalid",
//!    "resource": <the owner's _self>, "offerResourceId": <the owner's _rid>,
//!    "content": {"offerThroughput": 400}}
//! ```
//!
//! Clients find an offer by querying `r.resource` for their database's or
//! container's `_self`, so `resource` is always the owner's current `_self`.

use serde_json::{Value, json};

use super::Gateway;
use super::containers::collection_json;
use super::databases::database_json;
use super::queries::metadata_feed;
use super::requests::object_body;
use crate::registry::{Offer, OfferOwner, Throughput};
use crate::wire::{WireError, WireRequest, WireResponse, header};

/// The smallest manual throughput the service provisions.
const MIN_MANUAL: i64 = 400;
/// The smallest autoscale maximum the service provisions.
const MIN_AUTOSCALE: i64 = 1000;

impl Gateway {
    /// `GET /offers` (the read feed) and `POST /offers` (a query).
    pub(super) fn list_offers(
        &self,
        query: Option<&WireRequest>,
    ) -> Result<WireResponse, WireError> {
        let items = self
            .registry
            .offers()
            .iter()
            .map(|(offer, owner)| offer_json(offer, owner))
            .collect();
        metadata_feed("", "Offers", items, query)
    }

    pub(super) fn read_offer(&self, rid: &str) -> Result<WireResponse, WireError> {
        let (offer, owner) = self.registry.offer(rid)?;
        Ok(WireResponse::json(200, &offer_json(&offer, &owner)))
    }

    /// `PUT /offers/{rid}`: the SDKs send the offer they read with a new
    /// `content`; only the throughput in it changes.
    pub(super) fn replace_offer(
        &self,
        rid: &str,
        req: &WireRequest,
    ) -> Result<WireResponse, WireError> {
        let body = object_body(req, "offer")?;
        if let Some(other) = body.get("_rid").and_then(Value::as_str)
            && other != rid
        {
            return Err(WireError::bad_request(format!(
                "the offer body's _rid {other:?} is not {rid:?}, the offer in the path"
            )));
        }
        let content = body
            .get("content")
            .filter(|c| c.is_object())
            .ok_or_else(|| {
                WireError::bad_request(
                    "the offer body needs a content object, such as {\"offerThroughput\": 400}",
                )
            })?;
        let throughput = content_throughput(content)?;
        let (old, _) = self.registry.offer(rid)?;
        if matches!(old.throughput, Throughput::Manual(_))
            != matches!(throughput, Throughput::Manual(_))
        {
            return Err(WireError::bad_request(format!(
                "offer {rid:?} cannot change between manual and autoscale throughput by a \
                 replace (the service migrates offers with /offers/{{rid}}/operations, which \
                 Partita does not serve)"
            )));
        }
        let (offer, owner) = self.registry.replace_offer(rid, throughput)?;
        Ok(WireResponse::json(200, &offer_json(&offer, &owner)))
    }
}

/// The throughput a create request asks for in its headers, validated
/// (`None` for a database or container without an offer).
pub(super) fn requested_throughput(req: &WireRequest) -> Result<Option<Throughput>, WireError> {
    let manual = header(&req.headers, "x-ms-offer-throughput")?;
    let autoscale = header(&req.headers, "x-ms-cosmos-offer-autopilot-settings")?;
    match (manual, autoscale) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(WireError::bad_request(
            "x-ms-offer-throughput and x-ms-cosmos-offer-autopilot-settings cannot both be \
             given: a throughput is either manual or autoscale",
        )),
        (Some(text), None) => {
            let n = text.trim().parse::<i64>().map_err(|_| {
                WireError::bad_request(format!(
                    "the x-ms-offer-throughput header {text:?} must be a whole number"
                ))
            })?;
            manual_throughput(n).map(Some)
        }
        (None, Some(text)) => {
            let settings: Value = serde_json::from_str(text).map_err(|_| {
                WireError::bad_request(format!(
                    "the x-ms-cosmos-offer-autopilot-settings header {text:?} must be JSON \
                     such as {{\"maxThroughput\": 4000}}"
                ))
            })?;
            autoscale_throughput(&settings).map(Some)
        }
    }
}

/// The throughput of an offer's `content`: autoscale when it has
/// `offerAutopilotSettings`, else manual (`offerThroughput`).
fn content_throughput(content: &Value) -> Result<Throughput, WireError> {
    if let Some(settings) = content.get("offerAutopilotSettings") {
        return autoscale_throughput(settings);
    }
    let n = content
        .get("offerThroughput")
        .and_then(Value::as_i64)
        .ok_or_else(|| {
            WireError::bad_request(format!(
                "the offer content {content} needs a whole offerThroughput or \
                 offerAutopilotSettings"
            ))
        })?;
    manual_throughput(n)
}

fn manual_throughput(n: i64) -> Result<Throughput, WireError> {
    if n < MIN_MANUAL {
        return Err(below_minimum(n, MIN_MANUAL));
    }
    if n % 100 != 0 {
        return Err(WireError::bad_request(format!(
            "Requested throughput {n} is not a multiple of 100: manual throughput is \
             provisioned in steps of 100 RU/s"
        )));
    }
    Ok(Throughput::Manual(n.unsigned_abs()))
}

fn autoscale_throughput(settings: &Value) -> Result<Throughput, WireError> {
    let max = settings
        .get("maxThroughput")
        .and_then(Value::as_i64)
        .ok_or_else(|| {
            WireError::bad_request(format!(
                "the autoscale settings {settings} need a whole maxThroughput"
            ))
        })?;
    if max < MIN_AUTOSCALE {
        return Err(below_minimum(max, MIN_AUTOSCALE));
    }
    if max % 1000 != 0 {
        return Err(WireError::bad_request(format!(
            "Requested throughput {max} is not a multiple of 1000: an autoscale maximum is \
             provisioned in steps of 1000 RU/s"
        )));
    }
    let increment = settings.pointer("/autoUpgradePolicy/throughputPolicy/incrementPercent");
    let increment_percent = match increment {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| {
            WireError::bad_request(format!(
                "the autoscale incrementPercent {v} must be a whole number from 0"
            ))
        })?),
    };
    Ok(Throughput::Autoscale {
        max: max.unsigned_abs(),
        increment_percent,
    })
}

/// The service's message (the SDKs' tests look for it).
fn below_minimum(n: i64, min: i64) -> WireError {
    WireError::bad_request(format!(
        "Requested throughput {n} is less than required minimum throughput {min}"
    ))
}

fn offer_json(offer: &Offer, owner: &OfferOwner) -> Value {
    let owner = match owner {
        OfferOwner::Database(entry) => database_json(entry),
        OfferOwner::Collection(coll) => collection_json(coll),
    };
    json!({
        "id": offer.rid, "_rid": offer.rid, "_self": format!("offers/{}/", offer.rid),
        "_etag": offer.etag, "_ts": offer.ts,
        "offerVersion": "V2", "offerType": "Invalid",
        "resource": owner["_self"], "offerResourceId": owner["_rid"],
        "content": offer.throughput.content(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_parse_as_the_service_validates_them() {
        let ok = [
            (json!({"offerThroughput": 400}), Throughput::Manual(400)),
            (
                json!({"offerThroughput": 500,
                       "offerAutopilotSettings": {"maxThroughput": 7000,
                         "autoUpgradePolicy": {"throughputPolicy": {"incrementPercent": 0}}}}),
                Throughput::Autoscale {
                    max: 7000,
                    increment_percent: Some(0),
                },
            ),
            (
                json!({"offerAutopilotSettings": {"maxThroughput": 1000}}),
                Throughput::Autoscale {
                    max: 1000,
                    increment_percent: None,
                },
            ),
        ];
        for (content, throughput) in ok {
            assert_eq!(
                content_throughput(&content).unwrap(),
                throughput,
                "{content}"
            );
        }
        let bad = [
            (
                json!({"offerThroughput": 300}),
                "less than required minimum throughput 400",
            ),
            (json!({"offerThroughput": 450}), "multiple of 100"),
            (
                json!({"offerThroughput": "400"}),
                "needs a whole offerThroughput",
            ),
            (
                json!({"offerAutopilotSettings": {"maxThroughput": -200}}),
                "Requested throughput -200 is less than required minimum throughput 1000",
            ),
            (
                json!({"offerAutopilotSettings": {"maxThroughput": 1500}}),
                "multiple of 1000",
            ),
            (
                json!({"offerAutopilotSettings": {"maxThroughput": 4000,
                  "autoUpgradePolicy": {"throughputPolicy": {"incrementPercent": -1}}}}),
                "incrementPercent",
            ),
        ];
        for (content, needle) in bad {
            let err = content_throughput(&content).unwrap_err();
            assert_eq!(err.status, 400);
            assert!(err.message.contains(needle), "{content}: {}", err.message);
        }
    }

    #[test]
    fn autoscale_content_always_has_an_offer_throughput() {
        let content = Throughput::Autoscale {
            max: 7000,
            increment_percent: Some(0),
        }
        .content();
        assert_eq!(
            content,
            json!({"offerThroughput": 700, "offerAutopilotSettings": {"maxThroughput": 7000,
                   "autoUpgradePolicy": {"throughputPolicy": {"incrementPercent": 0}}}})
        );
        assert_eq!(
            content_throughput(&content).unwrap(),
            Throughput::Autoscale {
                max: 7000,
                increment_percent: Some(0)
            }
        );
    }
}
