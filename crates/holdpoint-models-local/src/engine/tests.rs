use super::*;

#[test]
fn utf8_is_taken_whole_characters_at_a_time() {
    let mut pending = "é".as_bytes()[..1].to_vec();
    let mut text = String::from("a");
    assert!(!take_utf8(&mut pending, &mut text));
    pending.push("é".as_bytes()[1]);
    pending.extend(b"b\xFFc");
    assert!(take_utf8(&mut pending, &mut text));
    assert_eq!(text, "aéb\u{FFFD}c");
    assert!(pending.is_empty());
}
