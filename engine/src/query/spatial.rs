//! Spatial functions over GeoJSON: `ST_DISTANCE`, `ST_WITHIN`,
//! `ST_INTERSECTS`, `ST_ISVALID`, `ST_ISVALIDDETAILED`, `ST_AREA`.
//!
//! Values are GeoJSON objects of type `Point`, `LineString`, `Polygon` or
//! `MultiPolygon` with `[longitude, latitude]` positions in degrees on the
//! WGS-84 geography, as Cosmos DB reads them. Anything else (another type,
//! a malformed object, a non-object) makes a function undefined, as on the
//! service; a well-formed but invalid shape (a latitude past 90, an open
//! ring) is undefined too, except to the validity functions, which say why.
//!
//! The geometry is the `geo` crate's:
//!
//! * **Distance** between two points is the geodesic on the WGS-84
//!   ellipsoid (Karney's algorithm through `geographiclib-rs`, accurate to
//!   about 15 nanometres), in metres. For other shapes it is 0 when they
//!   intersect, otherwise the geodesic length from a vertex of one shape to
//!   the closest point of the other, found along great circles
//!   (`HaversineClosestPoint`); the closest point on a sphere and on the
//!   ellipsoid differ by at most about 0.5% of the distance.
//! * **Containment and intersection** (`ST_WITHIN`, `ST_INTERSECTS`) treat
//!   edges as straight lines in longitude/latitude, where the service
//!   follows geodesics: the answers agree except near long edges, where
//!   a geodesic bows away from the straight line (for a 1° edge at
//!   mid-latitudes, by at most about a kilometre).
//! * **Area** is the geodesic area on the ellipsoid, in square metres.

use geo::{
    Closest, Coord, Distance, Geodesic, GeodesicArea, Geometry, HaversineClosestPoint, Intersects,
    LineString, MultiPolygon, Point, Polygon, Validation, Within,
};
use serde_json::{Value, json};

/// A GeoJSON value, read: the geometry, or why it is not a valid one.
enum Shape {
    Valid(Geometry<f64>),
    Invalid(String),
}

/// A `[longitude, latitude]` position.
fn position(v: &Value) -> Option<Coord<f64>> {
    let [x, y] = v.as_array()?.as_slice() else {
        return None;
    };
    Some(Coord {
        x: x.as_f64()?,
        y: y.as_f64()?,
    })
}

fn positions(v: &Value) -> Option<Vec<Coord<f64>>> {
    v.as_array()?.iter().map(position).collect()
}

fn rings(v: &Value) -> Option<Vec<Vec<Coord<f64>>>> {
    v.as_array()?.iter().map(positions).collect()
}

/// Why a position is out of range, if it is.
fn range_problem(c: &Coord<f64>) -> Option<String> {
    if !(-90.0..=90.0).contains(&c.y) {
        return Some("Latitude values must be between -90 and 90 degrees.".to_owned());
    }
    if !(-180.0..=180.0).contains(&c.x) {
        return Some("Longitude values must be between -180 and 180 degrees.".to_owned());
    }
    None
}

/// Checks a polygon's rings as GeoJSON wants them: closed, with at least
/// four positions.
fn ring_problem(kind: &str, rings: &[Vec<Coord<f64>>]) -> Option<String> {
    if rings.is_empty() {
        return Some(format!(
            "The {kind} input is not valid because it has no rings."
        ));
    }
    for (i, ring) in rings.iter().enumerate() {
        if ring.len() < 4 {
            return Some(format!(
                "The {kind} input is not valid because ring number {} has fewer than four points. \
                 Each ring of a polygon must have at least four points.",
                i + 1
            ));
        }
        if ring.first() != ring.last() {
            return Some(format!(
                "The {kind} input is not valid because the start and end points of the ring number {} \
                 are not the same. Each ring of a polygon must have the same start and end points.",
                i + 1
            ));
        }
    }
    None
}

fn polygon(rings: Vec<Vec<Coord<f64>>>) -> Polygon<f64> {
    let mut rings = rings.into_iter().map(LineString::new);
    let exterior = rings.next().unwrap_or_else(|| LineString::new(Vec::new()));
    Polygon::new(exterior, rings.collect())
}

/// Reads a GeoJSON geometry; None when the value is not one at all.
fn read(v: &Value) -> Option<Shape> {
    let obj = v.as_object()?;
    let kind = obj.get("type")?.as_str()?;
    let coords = obj.get("coordinates")?;
    let (geometry, all): (Geometry<f64>, Vec<Coord<f64>>) = match kind {
        "Point" => {
            let c = position(coords)?;
            (Geometry::Point(Point(c)), vec![c])
        }
        "LineString" => {
            let cs = positions(coords)?;
            if cs.len() < 2 {
                return Some(Shape::Invalid(
                    "The LineString input is not valid because it has fewer than two points."
                        .to_owned(),
                ));
            }
            (Geometry::LineString(LineString::new(cs.clone())), cs)
        }
        "Polygon" => {
            let rs = rings(coords)?;
            if let Some(problem) = ring_problem("Polygon", &rs) {
                return Some(Shape::Invalid(problem));
            }
            let all = rs.iter().flatten().copied().collect();
            (Geometry::Polygon(polygon(rs)), all)
        }
        "MultiPolygon" => {
            let polys: Vec<Vec<Vec<Coord<f64>>>> = coords
                .as_array()?
                .iter()
                .map(rings)
                .collect::<Option<_>>()?;
            for rs in &polys {
                if let Some(problem) = ring_problem("MultiPolygon", rs) {
                    return Some(Shape::Invalid(problem));
                }
            }
            let all = polys.iter().flatten().flatten().copied().collect();
            (
                Geometry::MultiPolygon(MultiPolygon::new(polys.into_iter().map(polygon).collect())),
                all,
            )
        }
        _ => return None,
    };
    if let Some(problem) = all.iter().find_map(range_problem) {
        return Some(Shape::Invalid(problem));
    }
    if let Err(e) = geometry.check_validation() {
        return Some(Shape::Invalid(format!(
            "The {kind} input is not valid: {e}."
        )));
    }
    Some(Shape::Valid(geometry))
}

/// A valid geometry, or None (undefined).
fn valid(v: &Value) -> Option<Geometry<f64>> {
    match read(v)? {
        Shape::Valid(g) => Some(g),
        Shape::Invalid(_) => None,
    }
}

fn vertices(g: &Geometry<f64>) -> Vec<Point<f64>> {
    use geo::CoordsIter;
    g.coords_iter().map(Point).collect()
}

/// The geodesic distance from `p` to the closest point of `g`.
fn point_to(p: Point<f64>, g: &Geometry<f64>) -> Option<f64> {
    if let Geometry::Point(q) = g {
        return Some(Geodesic.distance(p, *q));
    }
    match g.haversine_closest_point(&p) {
        Closest::Intersection(_) => Some(0.0),
        Closest::SinglePoint(q) => Some(Geodesic.distance(p, q)),
        Closest::Indeterminate => None,
    }
}

/// `ST_DISTANCE(a, b)` in metres (see the module docs for the method).
pub(crate) fn distance(a: &Value, b: &Value) -> Option<f64> {
    let (a, b) = (valid(a)?, valid(b)?);
    if let (Geometry::Point(p), Geometry::Point(q)) = (&a, &b) {
        return Some(Geodesic.distance(*p, *q));
    }
    if a.intersects(&b) {
        return Some(0.0);
    }
    let from_a = vertices(&a).into_iter().filter_map(|p| point_to(p, &b));
    let from_b = vertices(&b).into_iter().filter_map(|p| point_to(p, &a));
    from_a.chain(from_b).reduce(f64::min)
}

/// `ST_WITHIN(a, b)`: whether `a` lies within `b`.
pub(crate) fn within(a: &Value, b: &Value) -> Option<bool> {
    Some(valid(a)?.is_within(&valid(b)?))
}

/// `ST_INTERSECTS(a, b)`.
pub(crate) fn intersects(a: &Value, b: &Value) -> Option<bool> {
    Some(valid(a)?.intersects(&valid(b)?))
}

/// `ST_ISVALID(g)`: undefined when `g` is not GeoJSON of a supported type.
pub(crate) fn is_valid(v: &Value) -> Option<bool> {
    Some(matches!(read(v)?, Shape::Valid(_)))
}

/// `ST_ISVALIDDETAILED(g)`: `{"valid": true}` or `{"valid": false,
/// "reason": "..."}`.
pub(crate) fn is_valid_detailed(v: &Value) -> Option<Value> {
    Some(match read(v)? {
        Shape::Valid(_) => json!({"valid": true}),
        Shape::Invalid(reason) => json!({"valid": false, "reason": reason}),
    })
}

/// `ST_AREA(g)`: the geodesic area of a polygon or multipolygon in square
/// metres (0 for points and lines).
pub(crate) fn area(v: &Value) -> Option<f64> {
    Some(valid(v)?.geodesic_area_unsigned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(lon: f64, lat: f64) -> Value {
        json!({"type": "Point", "coordinates": [lon, lat]})
    }

    fn square(x0: f64, y0: f64, x1: f64, y1: f64) -> Value {
        json!({"type": "Polygon", "coordinates": [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]]})
    }

    #[test]
    fn distances_between_cities() {
        // Paris to London, and New York to Los Angeles: geodesic lengths on
        // WGS-84 as geographiclib reports them, to the metre.
        let paris = point(2.3522, 48.8566);
        let london = point(-0.1276, 51.5072);
        let d = distance(&paris, &london).unwrap();
        assert!((d - 343_923.0).abs() < 1_000.0, "{d}");
        let ny = point(-74.006, 40.7128);
        let la = point(-118.2437, 34.0522);
        let d = distance(&ny, &la).unwrap();
        assert!((d - 3_944_000.0).abs() < 5_000.0, "{d}");
        // The SDK test's pair: 0.1 degree of longitude at latitude 20.
        let d = distance(&point(20.0, 20.0), &point(20.1, 20.0)).unwrap();
        assert!((10_000.0..11_000.0).contains(&d), "{d}");
        assert_eq!(distance(&paris, &paris), Some(0.0));
    }

    #[test]
    fn distance_to_shapes() {
        let sq = square(0.0, 0.0, 1.0, 1.0);
        assert_eq!(distance(&point(0.5, 0.5), &sq), Some(0.0));
        // One degree of latitude south of the square's edge at the equator.
        let d = distance(&point(0.5, -1.0), &sq).unwrap();
        assert!((d - 110_574.0).abs() < 500.0, "{d}");
        let far = square(3.0, 0.0, 4.0, 1.0);
        let d = distance(&sq, &far).unwrap();
        assert!((d - 222_639.0).abs() < 1_000.0, "{d}");
    }

    #[test]
    fn containment_and_intersection() {
        let sq = square(0.0, 0.0, 10.0, 10.0);
        assert_eq!(within(&point(5.0, 5.0), &sq), Some(true));
        assert_eq!(within(&point(15.0, 5.0), &sq), Some(false));
        assert_eq!(within(&square(1.0, 1.0, 2.0, 2.0), &sq), Some(true));
        assert_eq!(intersects(&square(9.0, 9.0, 12.0, 12.0), &sq), Some(true));
        assert_eq!(
            intersects(&square(11.0, 11.0, 12.0, 12.0), &sq),
            Some(false)
        );
        let line = json!({"type": "LineString", "coordinates": [[-1, 5], [11, 5]]});
        assert_eq!(intersects(&line, &sq), Some(true));
        assert_eq!(within(&json!("not geojson"), &sq), None);
        assert_eq!(
            within(&json!({"type": "Circle", "coordinates": [0, 0]}), &sq),
            None
        );
    }

    #[test]
    fn invalid_shapes() {
        assert_eq!(is_valid(&point(0.0, 0.0)), Some(true));
        assert_eq!(is_valid(&point(100.0, 100.0)), Some(false));
        assert_eq!(distance(&point(100.0, 100.0), &point(0.0, 0.0)), None);
        let open = json!({"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]]});
        let detail = is_valid_detailed(&open).unwrap();
        assert_eq!(detail["valid"], json!(false));
        assert!(
            detail["reason"]
                .as_str()
                .unwrap()
                .contains("start and end points"),
            "{detail}"
        );
        let bow_tie =
            json!({"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]});
        assert_eq!(is_valid(&bow_tie), Some(false));
        assert_eq!(
            is_valid_detailed(&point(0.0, 91.0)),
            Some(
                json!({"valid": false, "reason": "Latitude values must be between -90 and 90 degrees."})
            )
        );
        assert_eq!(
            is_valid_detailed(&point(1.0, 2.0)),
            Some(json!({"valid": true}))
        );
        assert_eq!(
            is_valid(&json!({"type": "Point", "coordinates": [1]})),
            None
        );
        assert_eq!(is_valid(&json!(42)), None);
    }

    #[test]
    fn areas() {
        // One degree square at the equator: about 12,308 km².
        let a = area(&square(0.0, 0.0, 1.0, 1.0)).unwrap();
        assert!((a / 1e6 - 12_308.0).abs() < 10.0, "{a}");
        assert_eq!(area(&point(0.0, 0.0)), Some(0.0));
    }
}
