//! The frame body decoder: the format [`super::ser`] writes (little-endian, variable-length
//! integers), read by serde from one frame body with every length checked against the bytes
//! left in that body.
//!
//! A decoder that allocates what a length prefix claims before it reads the bytes lets a body
//! of a few bytes claiming a string of 2^42 bytes abort the process. Here nothing is
//! allocated for a length the body cannot hold:
//! - a string or byte buffer is taken from the body only when all its bytes are present, and
//!   only then copied;
//! - a sequence or map claiming more elements than bytes left is refused (every element of the
//!   wire types takes at least one byte), and sequences give serde no size hint, so vectors
//!   grow with the elements actually decoded instead of being sized by the claim.
//!
//! The round-trip tests here and in [`super::ser`] hold the two to the same format, and the
//! corpus seeds (`tests/corpus`) hold it to the bytes every earlier release wrote.

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

/// Why a body did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeError(String);

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        // Messages from serde name types and variants; keep them one bounded line.
        let mut s = msg.to_string();
        if s.len() > 200 {
            let mut cut = 200;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s.truncate(cut);
        }
        DeError(s.replace(['\n', '\r'], " "))
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, DeError> {
    Err(DeError(msg.into()))
}

// The varint markers: a first byte up to 250 is the value itself; these announce a
// wider little-endian integer after them.
const U16_BYTE: u8 = 251;
const U32_BYTE: u8 = 252;
const U64_BYTE: u8 = 253;
const U128_BYTE: u8 = 254;

/// Decodes one value that must fill `body` exactly.
pub fn from_body<T: de::DeserializeOwned>(body: &[u8]) -> Result<T, DeError> {
    let mut d = Decoder { body, pos: 0 };
    let v = T::deserialize(&mut d)?;
    if d.pos != body.len() {
        return err(format!("{} trailing bytes", body.len() - d.pos));
    }
    Ok(v)
}

struct Decoder<'b> {
    body: &'b [u8],
    pos: usize,
}

impl<'b> Decoder<'b> {
    fn left(&self) -> usize {
        self.body.len() - self.pos
    }

    /// The next `n` bytes, only when the body holds them.
    fn take(&mut self, n: usize) -> Result<&'b [u8], DeError> {
        if n > self.left() {
            return err(format!(
                "{n} bytes claimed, {} left in the frame",
                self.left()
            ));
        }
        let s = &self.body[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn byte(&mut self) -> Result<u8, DeError> {
        Ok(self.take(1)?[0])
    }

    /// An unsigned varint no wider than the marker `widest` allows.
    fn varint(&mut self, widest: u8) -> Result<u128, DeError> {
        let first = self.byte()?;
        let v = match first {
            0..=250 => return Ok(u128::from(first)),
            U16_BYTE => u128::from(u16::from_le_bytes(self.array()?)),
            U32_BYTE => u128::from(u32::from_le_bytes(self.array()?)),
            U64_BYTE => u128::from(u64::from_le_bytes(self.array()?)),
            U128_BYTE => u128::from_le_bytes(self.array()?),
            _ => return err("reserved integer marker"),
        };
        if first > widest {
            return err("integer wider than its type");
        }
        Ok(v)
    }

    fn u16(&mut self) -> Result<u16, DeError> {
        Ok(self.varint(U16_BYTE)? as u16)
    }
    fn u32(&mut self) -> Result<u32, DeError> {
        Ok(self.varint(U32_BYTE)? as u32)
    }
    fn u64(&mut self) -> Result<u64, DeError> {
        Ok(self.varint(U64_BYTE)? as u64)
    }
    fn u128(&mut self) -> Result<u128, DeError> {
        self.varint(U128_BYTE)
    }

    /// A length prefix, refused when the frame cannot hold that many bytes or elements.
    fn len(&mut self) -> Result<usize, DeError> {
        let n = self.u64()?;
        if n > self.left() as u64 {
            return err(format!(
                "a length of {n} claimed, {} bytes left in the frame",
                self.left()
            ));
        }
        Ok(n as usize)
    }

    fn bytes(&mut self) -> Result<&'b [u8], DeError> {
        let n = self.len()?;
        self.take(n)
    }

    fn str(&mut self) -> Result<&'b str, DeError> {
        std::str::from_utf8(self.bytes()?).or_else(|_| err("a string that is not UTF-8"))
    }
}

fn unzig16(n: u16) -> i16 {
    if n.is_multiple_of(2) {
        (n / 2) as i16
    } else {
        !(n / 2) as i16
    }
}
fn unzig32(n: u32) -> i32 {
    if n.is_multiple_of(2) {
        (n / 2) as i32
    } else {
        !(n / 2) as i32
    }
}
fn unzig64(n: u64) -> i64 {
    if n.is_multiple_of(2) {
        (n / 2) as i64
    } else {
        !(n / 2) as i64
    }
}
fn unzig128(n: u128) -> i128 {
    if n.is_multiple_of(2) {
        (n / 2) as i128
    } else {
        !(n / 2) as i128
    }
}

impl<'de> de::Deserializer<'de> for &mut Decoder<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, DeError> {
        err("self-describing decoding is not supported")
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.byte()? {
            0 => v.visit_bool(false),
            1 => v.visit_bool(true),
            _ => err("invalid boolean"),
        }
    }

    fn deserialize_i8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_i8(self.byte()? as i8)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_i16(unzig16(self.u16()?))
    }
    fn deserialize_i32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_i32(unzig32(self.u32()?))
    }
    fn deserialize_i64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_i64(unzig64(self.u64()?))
    }
    fn deserialize_i128<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_i128(unzig128(self.u128()?))
    }
    fn deserialize_u8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_u8(self.byte()?)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_u16(self.u16()?)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_u32(self.u32()?)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_u64(self.u64()?)
    }
    fn deserialize_u128<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_u128(self.u128()?)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_f32(f32::from_le_bytes(self.array()?))
    }
    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_f64(f64::from_le_bytes(self.array()?))
    }

    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        // A char is its UTF-8 encoding, one to four bytes.
        let first = *self
            .body
            .get(self.pos)
            .ok_or_else(|| DeError("end of frame in a char".into()))?;
        let width = match first {
            0x00..=0x7f => 1,
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => return err("invalid char"),
        };
        let s = std::str::from_utf8(self.take(width)?).or_else(|_| err("invalid char"))?;
        match s.chars().next() {
            Some(c) => v.visit_char(c),
            None => err("invalid char"),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_str(self.str()?)
    }
    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_str(self.str()?)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_bytes(self.bytes()?)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_bytes(self.bytes()?)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self.byte()? {
            0 => v.visit_none(),
            1 => v.visit_some(self),
            _ => err("invalid option tag"),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        v: V,
    ) -> Result<V::Value, DeError> {
        v.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        v: V,
    ) -> Result<V::Value, DeError> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let len = self.len()?;
        v.visit_seq(Seq {
            de: self,
            left: len,
            sized: false,
        })
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, DeError> {
        // A tuple's length comes from its type, not from the frame.
        v.visit_seq(Seq {
            de: self,
            left: len,
            sized: true,
        })
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        len: usize,
        v: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_tuple(len, v)
    }
    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        let len = self.len()?;
        v.visit_map(Map {
            de: self,
            left: len,
        })
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_tuple(fields.len(), v)
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        v.visit_enum(self)
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, _: V) -> Result<V::Value, DeError> {
        err("identifiers are not on the wire")
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, DeError> {
        err("skipping values is not supported")
    }
    fn is_human_readable(&self) -> bool {
        false
    }
}

struct Seq<'a, 'b> {
    de: &'a mut Decoder<'b>,
    left: usize,
    /// A tuple (length from the type) rather than a sequence (length from the frame).
    sized: bool,
}

impl<'de> de::SeqAccess<'de> for Seq<'_, '_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let before = self.de.pos;
        let v = seed.deserialize(&mut *self.de)?;
        if !self.sized && self.de.pos == before {
            // An element of no bytes would let a claimed length spin without reading.
            return err("a sequence element of zero bytes");
        }
        Ok(Some(v))
    }

    fn size_hint(&self) -> Option<usize> {
        // No hint: a vector grows with what is decoded, never with what is claimed.
        if self.sized { Some(self.left) } else { None }
    }
}

struct Map<'a, 'b> {
    de: &'a mut Decoder<'b>,
    left: usize,
}

impl<'de> de::MapAccess<'de> for Map<'_, '_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let before = self.de.pos;
        let k = seed.deserialize(&mut *self.de)?;
        if self.de.pos == before {
            return err("a map key of zero bytes");
        }
        Ok(Some(k))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        seed.deserialize(&mut *self.de)
    }

    fn size_hint(&self) -> Option<usize> {
        None
    }
}

impl<'de> de::EnumAccess<'de> for &mut Decoder<'_> {
    type Error = DeError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), DeError> {
        let idx = self.u32()?;
        let v = seed.deserialize(IntoDeserializer::<DeError>::into_deserializer(idx))?;
        Ok((v, self))
    }
}

impl<'de> de::VariantAccess<'de> for &mut Decoder<'_> {
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        Ok(())
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, DeError> {
        seed.deserialize(self)
    }
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, DeError> {
        de::Deserializer::deserialize_tuple(self, len, v)
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        de::Deserializer::deserialize_tuple(self, fields.len(), v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    fn enc<T: Serialize>(v: &T) -> Vec<u8> {
        super::super::ser::to_vec(v).unwrap()
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum E {
        Unit,
        New(i64),
        Tup(u8, char),
        Named { s: String, o: Option<Vec<u16>> },
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct All {
        b: bool,
        i8_: i8,
        i16_: i16,
        i32_: i32,
        i64_: i64,
        i128_: i128,
        u8_: u8,
        u16_: u16,
        u32_: u32,
        u64_: u64,
        u128_: u128,
        f32_: f32,
        f64_: f64,
        c: char,
        s: String,
        v: Vec<u8>,
        t: (u16, u16),
        m: std::collections::BTreeMap<String, u32>,
        e: Vec<E>,
        unit: (),
    }

    #[test]
    fn decodes_what_the_encoder_writes() {
        for (small, c) in [(true, 'a'), (false, 'é'), (true, '€'), (false, '🦀')] {
            let v = All {
                b: small,
                i8_: if small { -1 } else { i8::MIN },
                i16_: if small { -3 } else { i16::MIN },
                i32_: if small { 100 } else { i32::MIN },
                i64_: if small { -125 } else { i64::MAX },
                i128_: if small { 7 } else { i128::MIN },
                u8_: 255,
                u16_: if small { 250 } else { u16::MAX },
                u32_: if small { 251 } else { u32::MAX },
                u64_: if small { 65_536 } else { u64::MAX },
                u128_: if small { 1 } else { u128::MAX },
                f32_: 1.5,
                f64_: -0.25,
                c,
                s: "héllo".into(),
                v: (0..=255).collect(),
                t: (1, 65_535),
                m: [("a".to_string(), 1), ("bb".to_string(), 300)]
                    .into_iter()
                    .collect(),
                e: vec![
                    E::Unit,
                    E::New(-5),
                    E::Tup(9, 'x'),
                    E::Named {
                        s: String::new(),
                        o: Some(vec![1, 2, 70_00]),
                    },
                    E::Named {
                        s: "z".into(),
                        o: None,
                    },
                ],
                unit: (),
            };
            let back: All = from_body(&enc(&v)).unwrap();
            assert_eq!(back, v);
        }
    }

    #[test]
    fn a_string_longer_than_the_frame_is_refused_before_allocating() {
        // A varint u64 marker and 2^42.
        let mut body = vec![U64_BYTE];
        body.extend_from_slice(&(1u64 << 42).to_le_bytes());
        let e = from_body::<String>(&body).unwrap_err();
        assert!(e.to_string().contains("4398046511104"), "{e}");
    }

    #[test]
    fn a_sequence_longer_than_the_frame_is_refused() {
        let mut body = vec![U64_BYTE];
        body.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(from_body::<Vec<u64>>(&body).is_err());
        // Exactly as many elements as bytes left decodes.
        assert_eq!(from_body::<Vec<u8>>(&[3, 1, 2, 3]).unwrap(), vec![1, 2, 3]);
        assert!(from_body::<Vec<u8>>(&[4, 1, 2, 3]).is_err());
    }

    #[test]
    fn zero_byte_elements_cannot_spin() {
        assert!(from_body::<Vec<()>>(&[2, 0, 0]).is_err());
    }

    #[test]
    fn wider_markers_than_the_type_are_refused() {
        let mut body = vec![U32_BYTE];
        body.extend_from_slice(&70_000u32.to_le_bytes());
        assert!(from_body::<u16>(&body).is_err());
        assert_eq!(from_body::<u32>(&body).unwrap(), 70_000);
        assert!(from_body::<u8>(&[]).is_err());
        assert!(from_body::<u64>(&[255]).is_err());
    }

    #[test]
    fn trailing_bytes_and_bad_tags_are_errors() {
        assert!(from_body::<u8>(&[1, 2]).is_err());
        assert!(from_body::<bool>(&[2]).is_err());
        assert!(from_body::<Option<u8>>(&[2, 0]).is_err());
        assert!(from_body::<E>(&[9]).is_err());
        assert!(from_body::<String>(&[2, 0xff, 0xfe]).is_err());
        assert!(from_body::<char>(&[0xff]).is_err());
    }
}
