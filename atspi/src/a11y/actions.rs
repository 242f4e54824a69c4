//! The memory of objects' action names, kept between walks.

use std::collections::HashMap;

/// Most objects whose action names are remembered; the memory is emptied when it is full.
pub const ACTION_MEMORY: usize = 50_000;

/// Action names remembered per object. `Action.GetActions` answers with localized names in one
/// call; the real names need one `GetName` call per action. An object whose localized names
/// are unchanged since the last walk keeps the real names read then.
#[derive(Debug, Default)]
pub struct ActionNames {
    /// By bus name, then object path.
    map: std::sync::Mutex<HashMap<String, HashMap<String, Remembered>>>,
}

/// (localized names, real names).
type Remembered = (Vec<String>, Vec<String>);

impl ActionNames {
    /// The real names remembered for an object with these localized names.
    pub fn get(&self, bus: &str, path: &str, localized: &[String]) -> Option<Vec<String>> {
        let map = self.map.lock().ok()?;
        let (l, names) = map.get(bus)?.get(path)?;
        (l.as_slice() == localized).then(|| names.clone())
    }

    /// The real names remembered for an object, whatever its localized names are now.
    pub fn known(&self, bus: &str, path: &str) -> Option<Vec<String>> {
        let map = self.map.lock().ok()?;
        map.get(bus)?.get(path).map(|(_, names)| names.clone())
    }

    /// Remembers an object's names.
    pub fn put(&self, bus: &str, path: &str, localized: Vec<String>, names: Vec<String>) {
        if let Ok(mut map) = self.map.lock() {
            if map.values().map(HashMap::len).sum::<usize>() >= ACTION_MEMORY {
                map.clear();
            }
            map.entry(bus.to_string())
                .or_default()
                .insert(path.to_string(), (localized, names));
        }
    }

    /// Forgets an application's objects.
    pub fn forget_app(&self, bus: &str) {
        if let Ok(mut map) = self.map.lock() {
            map.remove(bus);
        }
    }
}
