//! Regenerates `kvtoken/src/tables.rs` from Oniguruma itself (through `tokenizers`' `SysRegex`),
//! so the classes match the regex engine the reference runs, not Rust's Unicode version.
//!
//! Run: `cargo run -p kvtoken --example gen_tables > kvtoken/src/tables.rs`

use tokenizers::utils::SysRegex;

fn mark(all: &str, starts: &[(usize, u32)], pattern: &str, class: u8, out: &mut [u8]) {
    let re = match SysRegex::new(pattern) {
        Ok(re) => re,
        Err(e) => panic!("bad pattern {pattern}: {e}"),
    };
    for (s, e) in re.find_iter(all) {
        let first = starts.partition_point(|&(b, _)| b < s);
        let last = starts.partition_point(|&(b, _)| b < e);
        for &(_, cp) in &starts[first..last] {
            assert_eq!(out[cp as usize], 0, "U+{cp:04X} in two classes");
            out[cp as usize] = class;
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
    let mut class = vec![0u8; 0x110000];
    mark(&all, &starts, r"\p{L}+", 1, &mut class);
    mark(&all, &starts, r"\p{N}+", 2, &mut class);
    mark(&all, &starts, r"\s+", 3, &mut class);
    let mut ranges: Vec<(u32, u32, u8)> = Vec::new();
    for (cp, &cls) in class.iter().enumerate().skip(0x80) {
        if cls == 0 {
            continue;
        }
        let cp = cp as u32;
        match ranges.last_mut() {
            Some(last) if last.1 + 1 == cp && last.2 == cls => last.1 = cp,
            _ => ranges.push((cp, cp, cls)),
        }
    }
    println!("//! Character classes of the pre-tokenizer regexes, generated from Oniguruma by");
    println!(
        "//! `cargo run -p kvtoken --example gen_tables > kvtoken/src/tables.rs`; do not edit."
    );
    println!("//! Checked against Oniguruma for every scalar value by `tests/tables.rs`.");
    println!();
    println!("/// ASCII classes: 0 other, 1 `\\p{{L}}`, 2 `\\p{{N}}`, 3 `\\s`.");
    print!("pub(crate) static ASCII: [u8; 128] = [");
    for (i, cls) in class.iter().take(128).enumerate() {
        if i % 32 == 0 {
            print!("\n    ");
        }
        print!("{cls}, ");
    }
    println!("\n];");
    println!();
    println!("/// Non-ASCII ranges `(first, last, class)`, sorted, disjoint; all other scalars are class 0.");
    println!(
        "pub(crate) static RANGES: [(u32, u32, u8); {}] = [",
        ranges.len()
    );
    for (a, b, c) in ranges {
        println!("    (0x{a:04X}, 0x{b:04X}, {c}),");
    }
    println!("];");
}
