//! Argument checking against the tools' own input schemas.
//!
//! The driver checks every call's arguments against the schema `tools/list` advertises, so the
//! two cannot drift: a wrong type, a value outside an enum or a range, or a missing required
//! argument is refused with `invalid_arguments`, naming the argument (never echoing its value).
//! Unknown arguments are ignored (contract §1). The checker understands the subset of JSON Schema
//! the tool schemas use: `type` (a name or a list), `enum`, `minimum`, `maximum`, `maxLength`,
//! `minItems`, `maxItems`, `items`, `properties`, `required`.

use serde_json::Value;

use crate::errors::{DriverError, ErrorCode};
use crate::tools;

/// Checks `args` against `tool`'s input schema.
pub fn check_args(tool: &str, args: &Value) -> Result<(), DriverError> {
    let schema = tools::input_schema(tool).ok_or_else(|| {
        DriverError::new(
            ErrorCode::InvalidArguments,
            format!("unknown tool {}", bounded(tool)),
        )
    })?;
    check(&schema, args, "arguments").map_err(|m| DriverError::new(ErrorCode::InvalidArguments, m))
}

fn bounded(s: &str) -> String {
    crate::model::escape_clip(s, 40)
}

fn type_ok(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "null" => v.is_null(),
        _ => false,
    }
}

/// Checks one value; `path` names it in the message (`arguments`, `argument observe.tree`).
pub fn check(schema: &Value, v: &Value, path: &str) -> Result<(), String> {
    if let Some(t) = schema.get("type") {
        let names: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(|x| x.as_str()).collect(),
            _ => vec![],
        };
        if !names.is_empty() && !names.iter().any(|n| type_ok(n, v)) {
            return Err(format!("{path} must be {}", names.join(" or ")));
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(v)
    {
        let list: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        return Err(format!("{path} must be one of {}", list.join(", ")));
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(format!("{path} must be at least {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(format!("{path} must be at most {max}"));
        }
    }
    if let (Some(s), Some(max)) = (v.as_str(), schema.get("maxLength").and_then(Value::as_u64))
        && s.chars().count() as u64 > max
    {
        return Err(format!("{path} is longer than {max} characters"));
    }
    if let Some(a) = v.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && (a.len() as u64) < min
        {
            return Err(format!("{path} needs at least {min} items"));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && a.len() as u64 > max
        {
            return Err(format!("{path} has more than {max} items"));
        }
        if let Some(items) = schema.get("items") {
            for (i, x) in a.iter().enumerate() {
                check(items, x, &format!("{path}[{i}]"))?;
            }
        }
    }
    if let Some(o) = v.as_object() {
        if let Some(Value::Array(req)) = schema.get("required") {
            for r in req.iter().filter_map(Value::as_str) {
                if !o.contains_key(r) || o[r].is_null() {
                    return Err(format!("argument {r} is required"));
                }
            }
        }
        if let Some(Value::Object(props)) = schema.get("properties") {
            for (k, sub) in props {
                if let Some(x) = o.get(k) {
                    // null stands for "absent" (some clients send it for unset optionals).
                    if x.is_null() {
                        continue;
                    }
                    let p = if path == "arguments" {
                        format!("argument {k}")
                    } else {
                        format!("{path}.{k}")
                    };
                    check(sub, x, &p)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refuses_wrong_types_and_ranges() {
        assert!(check_args("get_window_state", &json!({"skeleton": true})).is_ok());
        let e = check_args("get_window_state", &json!({"skeleton": "true"})).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        assert_eq!(e.message, "argument skeleton must be boolean");
        assert!(check_args("start_session", &json!({"input": "godmode"})).is_err());
        assert!(check_args("start_session", &json!({"lease_s": 5})).is_err());
        assert!(check_args("click", &json!({})).is_err());
        assert!(check_args("click", &json!({"element_token": "s1:2", "extra": 1})).is_ok());
        assert!(
            check_args(
                "click",
                &json!({"element_token": "s1:2", "observe": {"tree": 1}})
            )
            .is_err()
        );
        assert!(check_args("set_value", &json!({"element_token": "s1:2", "value": 3.5})).is_ok());
        assert!(check_args("hotkey", &json!({"keys": []})).is_err());
        assert!(check_args("nope", &json!({})).is_err());
    }

    #[test]
    fn messages_never_echo_values() {
        let e = check_args("type_text", &json!({"element_token": "s1:1", "text": 42})).unwrap_err();
        assert!(!e.message.contains("42"));
    }
}
