//! A small msgpack writer for the emulator's KV-event payloads (smallest encodings, as msgspec
//! writes them).

/// An append-only msgpack encoder.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Writer {
        Writer::default()
    }

    /// The bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    fn head(&mut self, fix: u8, fix_max: usize, m16: u8, m32: u8, n: usize) {
        if n <= fix_max {
            self.buf.push(fix | n as u8);
        } else if n <= 0xffff {
            self.buf.push(m16);
            self.buf.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            self.buf.push(m32);
            self.buf.extend_from_slice(&(n as u32).to_be_bytes());
        }
    }

    /// An array header of `n` elements.
    pub fn array(&mut self, n: usize) -> &mut Self {
        self.head(0x90, 15, 0xdc, 0xdd, n);
        self
    }

    /// A map header of `n` entries.
    pub fn map(&mut self, n: usize) -> &mut Self {
        self.head(0x80, 15, 0xde, 0xdf, n);
        self
    }

    /// A string.
    pub fn str(&mut self, s: &str) -> &mut Self {
        let n = s.len();
        if n <= 31 {
            self.buf.push(0xa0 | n as u8);
        } else if n <= 0xff {
            self.buf.push(0xd9);
            self.buf.push(n as u8);
        } else {
            self.head(0, 0, 0xda, 0xdb, n.max(1));
        }
        self.buf.extend_from_slice(s.as_bytes());
        self
    }

    /// An unsigned integer.
    pub fn uint(&mut self, v: u64) -> &mut Self {
        if v <= 0x7f {
            self.buf.push(v as u8);
        } else if v <= 0xff {
            self.buf.extend_from_slice(&[0xcc, v as u8]);
        } else if v <= 0xffff {
            self.buf.push(0xcd);
            self.buf.extend_from_slice(&(v as u16).to_be_bytes());
        } else if v <= 0xffff_ffff {
            self.buf.push(0xce);
            self.buf.extend_from_slice(&(v as u32).to_be_bytes());
        } else {
            self.buf.push(0xcf);
            self.buf.extend_from_slice(&v.to_be_bytes());
        }
        self
    }

    /// A signed integer (non-negative values use the unsigned forms).
    pub fn int(&mut self, v: i64) -> &mut Self {
        if v >= 0 {
            return self.uint(v as u64);
        }
        if v >= -32 {
            self.buf.push(v as i8 as u8);
        } else if v >= i64::from(i8::MIN) {
            self.buf.extend_from_slice(&[0xd0, v as i8 as u8]);
        } else if v >= i64::from(i16::MIN) {
            self.buf.push(0xd1);
            self.buf.extend_from_slice(&(v as i16).to_be_bytes());
        } else if v >= i64::from(i32::MIN) {
            self.buf.push(0xd2);
            self.buf.extend_from_slice(&(v as i32).to_be_bytes());
        } else {
            self.buf.push(0xd3);
            self.buf.extend_from_slice(&v.to_be_bytes());
        }
        self
    }

    /// nil.
    pub fn nil(&mut self) -> &mut Self {
        self.buf.push(0xc0);
        self
    }

    /// A float64.
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.buf.push(0xcb);
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smallest_forms() {
        let mut w = Writer::new();
        w.array(3)
            .uint(5)
            .uint(200)
            .uint(70000)
            .int(-1)
            .int(-100)
            .int(-6_157_722_022_507_328_103)
            .nil()
            .str("GPU")
            .map(1);
        assert_eq!(
            hex(&w.into_bytes()),
            "9305cc c8ce00011170ffd09cd3aa8b60720ed9cd99c0a3475055 81".replace(' ', "")
        );
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
}
