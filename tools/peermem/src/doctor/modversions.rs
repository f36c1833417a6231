// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Symbol versions (`CONFIG_MODVERSIONS`): the CRC a module file records for each
//! symbol it imports, and the CRC a `Module.symvers` gives for each export. Where they
//! differ the kernel refuses the module ("disagrees about version of symbol", then
//! "Unknown symbol ... (err -22)"): the case of peermem built against one peer-memory
//! core's module (ib_uverbs or ib_core: docs/abi.md 8) and loaded over another
//! (docs/abi.md 6).

use std::collections::BTreeMap;
use std::io::Read;

use object::{Object, ObjectSection};

/// A module file's ELF image: the file itself (`.ko`), or decompressed where dkms or
/// the distribution compressed it: xz (Debian's), zstd (Ubuntu's) or gzip. `None`:
/// another suffix, or a stream that does not decompress.
pub fn module_image(path: &str, bytes: Vec<u8>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    if path.ends_with(".ko") {
        return Some(bytes);
    } else if path.ends_with(".ko.xz") {
        lzma_rs::xz_decompress(&mut bytes.as_slice(), &mut out).ok()?;
    } else if path.ends_with(".ko.zst") {
        ruzstd::StreamingDecoder::new(bytes.as_slice())
            .ok()?
            .read_to_end(&mut out)
            .ok()?;
    } else if path.ends_with(".ko.gz") {
        flate2::read::GzDecoder::new(bytes.as_slice())
            .read_to_end(&mut out)
            .ok()?;
    } else {
        return None;
    }
    Some(out)
}

/// A `.modinfo` field of a module's ELF image (`version`, `author`, ...), as `modinfo
/// -F` prints it: the first `key=value` entry of that key. `None`: not an ELF file, no
/// `.modinfo` section, or no such entry.
pub fn modinfo_field(elf: &[u8], key: &str) -> Option<String> {
    let file = object::File::parse(elf).ok()?;
    let section = file.section_by_name(".modinfo")?;
    let data = section.data().ok()?;
    data.split(|b| *b == 0).find_map(|entry| {
        let text = std::str::from_utf8(entry).ok()?;
        let (k, v) = text.split_once('=')?;
        (k == key).then(|| v.to_owned())
    })
}

/// The imported symbols' CRCs a module file records, by name. The loader reads the
/// extended tables when the module has them (`__version_ext_crcs`, 32-bit CRCs, and
/// `__version_ext_names`, the names NUL-terminated in the same order;
/// `CONFIG_EXTENDED_MODVERSIONS`), else `__versions` (entries of an `unsigned long` CRC
/// and a 56-byte name on 64-bit kernels); so does this. `None`: not a 64-bit ELF file.
/// Empty: the module records no versions.
pub fn module_crcs(elf: &[u8]) -> Option<BTreeMap<String, u32>> {
    let file = object::File::parse(elf).ok()?;
    if !file.is_64() {
        return None;
    }
    let little = file.is_little_endian();
    let u32_of = |b: &[u8]| {
        let b = [b[0], b[1], b[2], b[3]];
        if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let section = |name: &str| file.section_by_name(name).and_then(|s| s.data().ok());
    let name_of = |b: &[u8]| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    let mut crcs = BTreeMap::new();
    if let (Some(values), Some(names)) = (
        section("__version_ext_crcs"),
        section("__version_ext_names"),
    ) {
        for (value, name) in values
            .chunks_exact(4)
            .zip(names.split_inclusive(|&c| c == 0))
        {
            crcs.insert(name_of(name), u32_of(value));
        }
    } else if let Some(table) = section("__versions") {
        for entry in table.chunks_exact(64) {
            // The low 32 bits of the unsigned long: a CRC is 32 bits.
            let crc = if little {
                u32_of(&entry[..4])
            } else {
                u32_of(&entry[4..8])
            };
            crcs.insert(name_of(&entry[8..]), crc);
        }
    }
    Some(crcs)
}

/// The CRC a `Module.symvers` gives `symbol` (its lines: `0xCRC<TAB>symbol<TAB>module
/// <TAB>export type<TAB>namespace`).
pub fn symvers_crc(symvers: &str, symbol: &str) -> Option<u32> {
    symvers.lines().find_map(|line| {
        let mut fields = line.split('\t');
        let crc = fields.next()?;
        (fields.next()? == symbol)
            .then(|| u32::from_str_radix(crc.trim_start_matches("0x"), 16).ok())
            .flatten()
    })
}

/// The module a `Module.symvers` says exports `symbol`: the base name of its module
/// path (`drivers/infiniband/core/ib_uverbs` gives `ib_uverbs`; `vmlinux`, the kernel
/// itself).
pub fn symvers_exporter<'a>(symvers: &'a str, symbol: &str) -> Option<&'a str> {
    symvers.lines().find_map(|line| {
        let mut fields = line.split('\t');
        fields.next()?;
        if fields.next()? != symbol {
            return None;
        }
        let path = fields.next()?.trim();
        path.rsplit('/').next().filter(|m| !m.is_empty())
    })
}
