//! The frame body encoder: the format [`super::de`] reads (byte for byte the one bincode 2's
//! standard configuration wrote in earlier releases: little-endian, variable-length integers),
//! written by serde into one buffer.
//!
//! - Unsigned integers wider than a byte are variable-length: a value up to 250 is its own
//!   byte; above, a marker byte (251, 252, 253, 254) then the value as a little-endian `u16`,
//!   `u32`, `u64` or `u128`, the narrowest that holds it. Signed ones are zigzag-encoded first.
//!   `u8` and `i8` are one byte; floats their little-endian bytes; `bool` 0 or 1; a `char` its
//!   UTF-8 bytes.
//! - Strings and byte buffers: the length, then the bytes. Sequences and maps: the number of
//!   elements, then each (a sequence of unknown length is refused). Options: 0, or 1 then the
//!   value. Tuples and structs: their fields in order, with no length. Enums: the variant's
//!   index, then its fields.
//!
//! The corpus seeds (`tests/corpus/*/seed-*.bin`), written by the earlier releases' encoder,
//! are compared with this encoder's bytes by the corpus test.

use std::fmt;

use serde::ser::{self, Serialize};

/// Why a value did not encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerError(String);

impl fmt::Display for SerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SerError {}

impl ser::Error for SerError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        SerError(msg.to_string())
    }
}

/// Appends `v`'s encoding to `out`.
pub fn to_vec_into<T: Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) -> Result<(), SerError> {
    v.serialize(&mut Encoder { out })
}

/// `v`'s encoding.
pub fn to_vec<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, SerError> {
    let mut out = Vec::new();
    to_vec_into(v, &mut out)?;
    Ok(out)
}

struct Encoder<'a> {
    out: &'a mut Vec<u8>,
}

impl Encoder<'_> {
    fn varint(&mut self, v: u128) {
        if v <= 250 {
            self.out.push(v as u8);
        } else if let Ok(v) = u16::try_from(v) {
            self.out.push(251);
            self.out.extend_from_slice(&v.to_le_bytes());
        } else if let Ok(v) = u32::try_from(v) {
            self.out.push(252);
            self.out.extend_from_slice(&v.to_le_bytes());
        } else if let Ok(v) = u64::try_from(v) {
            self.out.push(253);
            self.out.extend_from_slice(&v.to_le_bytes());
        } else {
            self.out.push(254);
            self.out.extend_from_slice(&v.to_le_bytes());
        }
    }

    fn len(&mut self, n: usize) {
        self.varint(n as u128);
    }
}

fn zigzag(v: i128) -> u128 {
    ((v << 1) ^ (v >> 127)) as u128
}

impl<'a, 'b> ser::Serializer for &'a mut Encoder<'b> {
    type Ok = ();
    type Error = SerError;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn serialize_bool(self, v: bool) -> Result<(), SerError> {
        self.out.push(u8::from(v));
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), SerError> {
        self.out.push(v as u8);
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result<(), SerError> {
        self.varint(zigzag(i128::from(v)));
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result<(), SerError> {
        self.varint(zigzag(i128::from(v)));
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), SerError> {
        self.varint(zigzag(i128::from(v)));
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), SerError> {
        self.varint(zigzag(v));
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), SerError> {
        self.out.push(v);
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result<(), SerError> {
        self.varint(u128::from(v));
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result<(), SerError> {
        self.varint(u128::from(v));
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), SerError> {
        self.varint(u128::from(v));
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), SerError> {
        self.varint(v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), SerError> {
        self.out.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), SerError> {
        self.out.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), SerError> {
        let mut b = [0u8; 4];
        self.out.extend_from_slice(v.encode_utf8(&mut b).as_bytes());
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), SerError> {
        self.len(v.len());
        self.out.extend_from_slice(v.as_bytes());
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), SerError> {
        self.len(v.len());
        self.out.extend_from_slice(v);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), SerError> {
        self.out.push(0);
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), SerError> {
        self.out.push(1);
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), SerError> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), SerError> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
    ) -> Result<(), SerError> {
        self.varint(u128::from(index));
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), SerError> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
        v: &T,
    ) -> Result<(), SerError> {
        self.varint(u128::from(index));
        v.serialize(self)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self, SerError> {
        let n = len.ok_or_else(|| SerError("a sequence of unknown length".into()))?;
        self.len(n);
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, SerError> {
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, SerError> {
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, SerError> {
        self.varint(u128::from(index));
        Ok(self)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self, SerError> {
        let n = len.ok_or_else(|| SerError("a map of unknown length".into()))?;
        self.len(n);
        Ok(self)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, SerError> {
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        index: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self, SerError> {
        self.varint(u128::from(index));
        Ok(self)
    }
    fn is_human_readable(&self) -> bool {
        false
    }
}

macro_rules! compound {
    ($tr:ident, $method:ident $(, $key:ident)?) => {
        impl ser::$tr for &mut Encoder<'_> {
            type Ok = ();
            type Error = SerError;
            fn $method<T: Serialize + ?Sized>(
                &mut self,
                $($key: &'static str,)?
                v: &T,
            ) -> Result<(), SerError> {
                $(let _ = $key;)?
                v.serialize(&mut **self)
            }
            fn end(self) -> Result<(), SerError> {
                Ok(())
            }
        }
    };
}

compound!(SerializeSeq, serialize_element);
compound!(SerializeTuple, serialize_element);
compound!(SerializeTupleStruct, serialize_field);
compound!(SerializeTupleVariant, serialize_field);
compound!(SerializeStruct, serialize_field, name);
compound!(SerializeStructVariant, serialize_field, name);

impl ser::SerializeMap for &mut Encoder<'_> {
    type Ok = ();
    type Error = SerError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), SerError> {
        k.serialize(&mut **self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), SerError> {
        v.serialize(&mut **self)
    }
    fn end(self) -> Result<(), SerError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    /// The integer widths at their boundaries, as the format (and bincode before this encoder)
    /// writes them.
    #[test]
    fn integers_take_the_narrowest_width() {
        let e = |v: u64| to_vec(&v).unwrap();
        assert_eq!(e(0), [0]);
        assert_eq!(e(250), [250]);
        assert_eq!(e(251), [251, 251, 0]);
        assert_eq!(e(65_535), [251, 255, 255]);
        assert_eq!(e(65_536), [252, 0, 0, 1, 0]);
        assert_eq!(e(u64::from(u32::MAX) + 1), [253, 0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(to_vec(&-1i32).unwrap(), [1]);
        assert_eq!(to_vec(&1i32).unwrap(), [2]);
        assert_eq!(to_vec(&i64::MIN).unwrap()[0], 253);
        assert_eq!(to_vec(&u128::MAX).unwrap()[0], 254);
        assert_eq!(to_vec(&7u8).unwrap(), [7]);
        assert_eq!(to_vec(&-2i8).unwrap(), [0xfe]);
    }

    #[test]
    fn strings_options_sequences_and_enums() {
        #[derive(Serialize)]
        enum E {
            A,
            B(u32),
            C { x: String, y: Option<bool> },
        }
        assert_eq!(to_vec("hé").unwrap(), [3, b'h', 0xc3, 0xa9]);
        assert_eq!(to_vec(&Some(300u16)).unwrap(), [1, 251, 44, 1]);
        assert_eq!(to_vec(&None::<u8>).unwrap(), [0]);
        assert_eq!(to_vec(&vec![1u32, 2]).unwrap(), [2, 1, 2]);
        assert_eq!(to_vec(&E::A).unwrap(), [0]);
        assert_eq!(to_vec(&E::B(9)).unwrap(), [1, 9]);
        assert_eq!(
            to_vec(&E::C {
                x: "a".into(),
                y: Some(true)
            })
            .unwrap(),
            [2, 1, b'a', 1, 1]
        );
        assert_eq!(to_vec(&'€').unwrap(), "€".as_bytes());
        assert_eq!(to_vec(&1.5f64).unwrap(), 1.5f64.to_le_bytes());
    }
}
