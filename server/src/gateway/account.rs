//! Account discovery (`GET /`): the account's name, its one region's
//! endpoint (with the scheme the transport serves) and the consistency and
//! query limits the SDKs read before their first request.
//!
//! The endpoint is the host the client named, except that a client that
//! named `localhost` is given the loopback address it reached, as the
//! emulator does (`https://127.0.0.1:8081/`): the SDKs' tests tell the
//! emulator's "regions" apart by those two names.

use serde_json::json;

use super::Gateway;
use crate::wire::{WireError, WireRequest, WireResponse, header};

impl Gateway {
    pub(super) fn account(&self, req: &WireRequest) -> Result<WireResponse, WireError> {
        let endpoint = format!("{}://{}/", self.scheme, advertised_host(req)?);
        let location = json!([{"name": "South Central US", "databaseAccountEndpoint": endpoint}]);
        Ok(WireResponse::json(
            200,
            &json!({
                "id": "partita",
                "_rid": "partita.sql.cosmos.azure.com",
                "_self": "",
                "media": "//media/",
                "addresses": "//addresses/",
                "_dbs": "//dbs/",
                "writableLocations": location,
                "readableLocations": location,
                "enableMultipleWriteLocations": false,
                "userConsistencyPolicy": {"defaultConsistencyLevel": "Session"},
                "userReplicationPolicy": {"asyncReplication": false, "minReplicaSetSize": 1, "maxReplicasetSize": 4},
                "systemReplicationPolicy": {"minReplicaSetSize": 1, "maxReplicasetSize": 4},
                "readPolicy": {"primaryReadCoefficient": 1, "secondaryReadCoefficient": 1},
                "queryEngineConfiguration": "{\"maxSqlQueryInputLength\":262144,\"sqlAllowTop\":true,\"sqlAllowAggregateFunctions\":true,\"sqlAllowSubQuery\":true}",
            }),
        ))
    }
}

/// The `host:port` the account advertises for `req` (see the module docs).
pub(super) fn advertised_host(req: &WireRequest) -> Result<String, WireError> {
    let host = header(&req.headers, "host")?.unwrap_or("127.0.0.1:8081");
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    Ok(match req.local_addr {
        Some(local) if name.eq_ignore_ascii_case("localhost") && local.ip().is_loopback() => {
            local.to_string()
        }
        _ => host.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use hyper::HeaderMap;

    use super::*;

    fn request(host: &str, local: Option<&str>) -> WireRequest {
        let mut headers = HeaderMap::new();
        headers.insert("host", host.parse().unwrap());
        WireRequest {
            method: "GET".to_owned(),
            path: "/".to_owned(),
            headers,
            body: bytes::Bytes::new(),
            local_addr: local.map(|a| a.parse::<SocketAddr>().unwrap()),
            remote_addr: None,
        }
    }

    #[test]
    fn localhost_is_advertised_as_the_loopback_address_reached() {
        let advertised = |host, local| advertised_host(&request(host, local)).unwrap();
        assert_eq!(
            advertised("localhost:8081", Some("127.0.0.1:8081")),
            "127.0.0.1:8081"
        );
        assert_eq!(advertised("LOCALHOST:9", Some("[::1]:9")), "[::1]:9");
        // Any other name, and requests that came over no socket, as named.
        assert_eq!(
            advertised("partita:8081", Some("172.17.0.2:8081")),
            "partita:8081"
        );
        assert_eq!(
            advertised("127.0.0.1:8081", Some("127.0.0.1:8081")),
            "127.0.0.1:8081"
        );
        assert_eq!(advertised("localhost:8081", None), "localhost:8081");
    }
}
