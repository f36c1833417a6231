// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A minimal PNG encoder: 8-bit RGB, no filtering, zlib stream of stored deflate blocks.

/// The eight bytes every PNG starts with.
pub const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
}

static CRC_TABLE: [u32; 256] = crc_table();

/// CRC-32 (ISO 3309, as PNG uses it) of the concatenation of `parts`.
pub fn crc32(parts: &[&[u8]]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for part in parts {
        for &b in *part {
            c = CRC_TABLE[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
        }
    }
    c ^ 0xffff_ffff
}

/// Adler-32 checksum (RFC 1950).
pub fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes is the most that can be summed before b overflows u32.
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += x as u32;
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// A zlib stream (RFC 1950) holding `data` in stored (uncompressed) deflate blocks.
pub fn zlib_stored(data: &[u8]) -> Vec<u8> {
    const MAX_BLOCK: usize = 65535;
    let mut out = Vec::with_capacity(data.len() + data.len() / MAX_BLOCK * 5 + 16);
    // CMF: deflate, 32 KiB window; FLG: no dictionary, fastest, (CMF*256+FLG) % 31 == 0.
    out.extend_from_slice(&[0x78, 0x01]);
    let mut blocks = data.chunks(MAX_BLOCK).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        let last = blocks.peek().is_none();
        out.push(u8::from(last)); // BFINAL, BTYPE=00
        let len = block.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32(&[kind, data]).to_be_bytes());
}

/// The raw image data PNG compresses: each row prefixed by filter type 0 (None).
pub fn filtered_rows(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let stride = width as usize * 3;
    let mut raw = Vec::with_capacity((stride + 1) * height as usize);
    for row in rgb.chunks(stride).take(height as usize) {
        raw.push(0);
        raw.extend_from_slice(row);
    }
    raw
}

/// Encodes an 8-bit RGB image (`rgb.len() == width * height * 3`) as a PNG file.
pub fn encode_rgb(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    assert_eq!(
        rgb.len(),
        width as usize * height as usize * 3,
        "pixel buffer size"
    );
    let mut out = SIGNATURE.to_vec();
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    // Bit depth 8, colour type 2 (RGB), compression 0, filter 0, no interlace.
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(
        &mut out,
        b"IDAT",
        &zlib_stored(&filtered_rows(width, height, rgb)),
    );
    chunk(&mut out, b"IEND", &[]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn be32(b: &[u8]) -> u32 {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Splits a PNG into (type, data), checking each chunk's CRC by recomputing it.
    fn chunks(png: &[u8]) -> Vec<([u8; 4], Vec<u8>)> {
        assert_eq!(png[..8], SIGNATURE);
        let mut at = 8;
        let mut out = Vec::new();
        while at < png.len() {
            let len = be32(&png[at..]) as usize;
            let kind: [u8; 4] = png[at + 4..at + 8].try_into().unwrap();
            let data = &png[at + 8..at + 8 + len];
            let crc = be32(&png[at + 8 + len..]);
            assert_eq!(crc, crc32(&[&kind, data]), "CRC of {:?}", kind);
            out.push((kind, data.to_vec()));
            at += 12 + len;
        }
        assert_eq!(at, png.len());
        out
    }

    /// Undoes [`zlib_stored`], checking the header, block lengths and Adler-32.
    fn unstore(z: &[u8]) -> Vec<u8> {
        assert_eq!(z[0], 0x78);
        assert_eq!((u16::from(z[0]) * 256 + u16::from(z[1])) % 31, 0);
        let mut at = 2;
        let mut data = Vec::new();
        loop {
            let header = z[at];
            assert_eq!(header & 0b110, 0, "stored block");
            let len = u16::from_le_bytes([z[at + 1], z[at + 2]]);
            let nlen = u16::from_le_bytes([z[at + 3], z[at + 4]]);
            assert_eq!(len, !nlen);
            data.extend_from_slice(&z[at + 5..at + 5 + len as usize]);
            at += 5 + len as usize;
            if header & 1 == 1 {
                break;
            }
        }
        assert_eq!(z.len(), at + 4);
        assert_eq!(be32(&z[at..]), adler32(&data));
        data
    }

    #[test]
    fn checksums_match_known_values() {
        assert_eq!(crc32(&[b"123456789"]), 0xcbf4_3926);
        assert_eq!(crc32(&[b"1234", b"56789"]), 0xcbf4_3926);
        assert_eq!(crc32(&[b"IEND"]), 0xae42_6082);
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
        assert_eq!(adler32(b""), 1);
        // Long input exercises the modulo reduction.
        let big = vec![0xffu8; 100_000];
        let (mut a, mut b) = (1u64, 0u64);
        for &x in &big {
            a = (a + x as u64) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!(adler32(&big), ((b << 16) | a) as u32);
    }

    #[test]
    fn zlib_splits_into_stored_blocks() {
        assert_eq!(
            zlib_stored(b""),
            vec![0x78, 0x01, 1, 0, 0, 0xff, 0xff, 0, 0, 0, 1]
        );
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let z = zlib_stored(&data);
        // 4 blocks (3 full of 65535 bytes), 5 header bytes each, 2 + 4 framing.
        assert_eq!(z.len(), data.len() + 4 * 5 + 6);
        assert_eq!(unstore(&z), data);
    }

    #[test]
    fn png_structure_is_valid() {
        let (w, h) = (3u32, 2u32);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| i as u8 * 10).collect();
        let png = encode_rgb(w, h, &rgb);
        let chunks = chunks(&png);
        let kinds: Vec<&[u8; 4]> = chunks.iter().map(|c| &c.0).collect();
        assert_eq!(kinds, [b"IHDR", b"IDAT", b"IEND"]);
        let ihdr = &chunks[0].1;
        assert_eq!(ihdr.len(), 13);
        assert_eq!(be32(&ihdr[0..]), 3);
        assert_eq!(be32(&ihdr[4..]), 2);
        assert_eq!(ihdr[8..], [8, 2, 0, 0, 0]);
        let raw = unstore(&chunks[1].1);
        assert_eq!(
            raw,
            [
                0, 0, 10, 20, 30, 40, 50, 60, 70, 80, //
                0, 90, 100, 110, 120, 130, 140, 150, 160, 170
            ]
        );
        assert!(chunks[2].1.is_empty());
        assert_eq!(png[png.len() - 4..], [0xae, 0x42, 0x60, 0x82]);
    }
}
