//! Regenerates `kvtoken/src/tables_o200k.rs` from Oniguruma itself (through `tokenizers`'
//! `SysRegex`): the general categories the o200k pre-tokenizer regex names (`\p{Lu}`,
//! `\p{Lt}`, `\p{Ll}`, `\p{Lm}`, `\p{Lo}`, `\p{M}`) with `\p{L}`, `\p{N}` and `\s`, as the
//! regex engine the reference runs sees them (not Rust's Unicode version).
//!
//! Run: `cargo run -p kvtoken --example gen_tables_o200k > kvtoken/src/tables_o200k.rs`

use tokenizers::utils::SysRegex;

/// `\p{L}`.
const L: u8 = 1;
/// `\p{N}`.
const N: u8 = 2;
/// `\s`.
const S: u8 = 4;
/// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
const U: u8 = 8;
/// `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
const W: u8 = 16;

fn mark(all: &str, starts: &[(usize, u32)], pattern: &str, bits: u8, out: &mut [u8]) {
    let re = match SysRegex::new(pattern) {
        Ok(re) => re,
        Err(e) => panic!("bad pattern {pattern}: {e}"),
    };
    for (s, e) in re.find_iter(all) {
        let first = starts.partition_point(|&(b, _)| b < s);
        let last = starts.partition_point(|&(b, _)| b < e);
        for &(_, cp) in &starts[first..last] {
            out[cp as usize] |= bits;
        }
    }
}

fn main() {
    let mut all = String::new();
    let mut starts = Vec::new();
    for cp in 0u32..=0x10FFFF {
        if let Some(c) = char::from_u32(cp) {
            starts.push((all.len(), cp));
            all.push(c);
        }
    }
    let mut bits = vec![0u8; 0x110000];
    mark(&all, &starts, r"\p{L}+", L, &mut bits);
    mark(&all, &starts, r"\p{N}+", N, &mut bits);
    mark(&all, &starts, r"\s+", S, &mut bits);
    mark(
        &all,
        &starts,
        r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+",
        U,
        &mut bits,
    );
    mark(&all, &starts, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]+", W, &mut bits);
    // Every letter is in one of the two case classes; L, N and \s exclude one another.
    for (cp, &b) in bits.iter().enumerate() {
        let exclusive = [L, N, S].iter().filter(|&&x| b & x != 0).count() <= 1;
        assert!(exclusive, "U+{cp:04X}: {b:#b}");
        assert!(
            b & L == 0 || b & (U | W) != 0,
            "U+{cp:04X}: a letter in no case class"
        );
        assert!(b & (U | W) == 0 || b & (N | S) == 0, "U+{cp:04X}: {b:#b}");
    }
    let mut ranges: Vec<(u32, u32, u8)> = Vec::new();
    for (cp, &b) in bits.iter().enumerate().skip(0x80) {
        if b == 0 {
            continue;
        }
        let cp = cp as u32;
        match ranges.last_mut() {
            Some(last) if last.1 + 1 == cp && last.2 == b => last.1 = cp,
            _ => ranges.push((cp, cp, b)),
        }
    }
    println!("//! Character classes of the o200k pre-tokenizer regex, generated from Oniguruma by");
    println!(
        "//! `cargo run -p kvtoken --example gen_tables_o200k > kvtoken/src/tables_o200k.rs`;"
    );
    println!(
        "//! do not edit. Checked against Oniguruma for every scalar value by the unit test in"
    );
    println!("//! `src/pretok/o200k.rs`.");
    println!();
    println!("/// ASCII class bits: 1 `\\p{{L}}`, 2 `\\p{{N}}`, 4 `\\s`, 8 `[\\p{{Lu}}\\p{{Lt}}\\p{{Lm}}\\p{{Lo}}\\p{{M}}]`,");
    println!("/// 16 `[\\p{{Ll}}\\p{{Lm}}\\p{{Lo}}\\p{{M}}]`.");
    print!("pub(crate) static ASCII: [u8; 128] = [");
    for (i, b) in bits.iter().take(128).enumerate() {
        if i % 32 == 0 {
            print!("\n    ");
        }
        print!("{b}, ");
    }
    println!("\n];");
    println!();
    println!("/// Non-ASCII ranges `(first, last, bits)`, sorted, disjoint; all other scalars have no bit.");
    println!(
        "pub(crate) static RANGES: [(u32, u32, u8); {}] = [",
        ranges.len()
    );
    for (a, b, c) in ranges {
        println!("    (0x{a:04X}, 0x{b:04X}, {c}),");
    }
    println!("];");
}
