//! Lowercase hex of bytes: digests as records, plans and file names show them.
//!
//! One function for what was `format!("{b:02x}")` per byte, which the run record pays for
//! every event twice (the bus's chain and the record's): a 32-byte digest cost about as
//! much to write out as to compute.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` as lowercase hex, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 0xf) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn is_what_format_writes() {
        let bytes: Vec<u8> = (0..=255).collect();
        let formatted: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(super::hex(&bytes), formatted);
        assert_eq!(super::hex(&[]), "");
    }
}
