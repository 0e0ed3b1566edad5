//! Script log output (`console.log` in JavaScript, the `log` import in
//! WebAssembly), kept up to the call's limit the same way in both runtimes,
//! so a procedure moved from one to the other logs the same text.

/// What ends a log that reached its limit.
const TRUNCATED: &str = "…[log truncated]";

/// Appends `text` to `logs` as given, with no separator (Cosmos DB's
/// `console.log` does the same: the JavaScript SDK's own test expects
/// exactly `"The value of x is 1."`). `logs` may hold at most `max` bytes:
/// text that does not fit is cut (at a character boundary) and followed by
/// a marker, and nothing is appended after the marker.
pub(crate) fn append(logs: &mut String, line: &str, max: usize) {
    if logs.ends_with(TRUNCATED) {
        return;
    }
    let room = max
        .saturating_sub(TRUNCATED.len())
        .saturating_sub(logs.len());
    if line.len() < room {
        logs.push_str(line);
    } else {
        let mut cut = room.min(line.len());
        while cut > 0 && !line.is_char_boundary(cut) {
            cut -= 1;
        }
        logs.push_str(&line[..cut]);
        logs.push_str(TRUNCATED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_fit_until_the_limit_then_one_marker_ends_the_log() {
        let mut logs = String::new();
        append(&mut logs, "first", 40);
        append(&mut logs, " second", 40);
        assert_eq!(logs, "first second", "appended as given");
        append(&mut logs, "ééééééééééééééé", 40);
        assert!(
            logs.starts_with("first second") && logs.ends_with(TRUNCATED),
            "{logs:?}"
        );
        assert!(logs.len() <= 40, "{} bytes", logs.len());
        let full = logs.clone();
        append(&mut logs, "more", 40);
        assert_eq!(logs, full, "nothing after the marker");
    }
}
