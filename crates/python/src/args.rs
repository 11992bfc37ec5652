//! Integer and device-list arguments from Python: a negative count, seed or id is a
//! `ValueError` naming the argument (not the `OverflowError` an unsigned extraction raises),
//! and `devices` is checked whole before anything runs.

use crate::arrays::{type_error, value_error};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyString};

/// The integer argument `name` = `value` as a `T` (a count, width, seed or id): a
/// `ValueError` naming it when negative or past `T`'s range. Arguments are taken as `i128`
/// so that any seed up to 2^64 - 1 and any negative value reach this check.
pub(crate) fn non_negative<T: TryFrom<i128>>(name: &str, value: i128) -> PyResult<T> {
    if value < 0 {
        return Err(value_error(format!(
            "{name} = {value}: it must be a non-negative integer"
        )));
    }
    T::try_from(value).map_err(|_| value_error(format!("{name} = {value}: too large")))
}

/// [`non_negative`] of an optional argument.
pub(crate) fn non_negative_opt<T: TryFrom<i128>>(
    name: &str,
    value: Option<i128>,
) -> PyResult<Option<T>> {
    value.map(|v| non_negative(name, v)).transpose()
}

/// The `devices` argument of `train`: how many ranks, or which GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Devices {
    /// `devices=N`: `N` ranks (GPUs `0..N` on CUDA).
    Count(usize),
    /// `devices=[i, j, ...]`: one rank per listed id (GPU ordinals on CUDA; on the CPU only
    /// their number counts).
    Ids(Vec<usize>),
}

impl Devices {
    /// Number of ranks.
    pub(crate) fn ranks(&self) -> usize {
        match self {
            Devices::Count(n) => *n,
            Devices::Ids(ids) => ids.len(),
        }
    }

    /// The GPU ordinals: the listed ids, or `0..N`.
    pub(crate) fn gpus(&self) -> Vec<usize> {
        match self {
            Devices::Count(n) => (0..*n).collect(),
            Devices::Ids(ids) => ids.clone(),
        }
    }

    /// `devices` as given: an int >= 1, or a sequence (list, tuple, range, NumPy array) of
    /// distinct non-negative ints. Bad values are a `ValueError`, bad types a `TypeError`,
    /// each naming `devices`.
    pub(crate) fn parse(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let what = |obj: &Bound<'_, PyAny>| {
            obj.get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        };
        if obj.is_instance_of::<PyBool>() || obj.is_instance_of::<PyString>() {
            return Err(type_error(format!(
                "devices must be an int (a number of ranks) or a list of device ids; got {}",
                what(obj)
            )));
        }
        if let Ok(n) = obj.extract::<i128>() {
            if n < 1 {
                return Err(value_error(format!(
                    "devices = {n}: at least one device (devices=N runs N ranks)"
                )));
            }
            return Ok(Devices::Count(non_negative("devices", n)?));
        }
        let items = obj.try_iter().map_err(|_| {
            type_error(format!(
                "devices must be an int (a number of ranks) or a list of device ids; got {}",
                what(obj)
            ))
        })?;
        let mut ids: Vec<usize> = Vec::new();
        for (i, item) in items.enumerate() {
            let item = item?;
            if item.is_instance_of::<PyBool>() {
                return Err(type_error(format!(
                    "devices[{i}] is a bool; device ids are ints"
                )));
            }
            let id = item.extract::<i128>().map_err(|_| {
                type_error(format!(
                    "devices[{i}] is {}; device ids are ints",
                    what(&item)
                ))
            })?;
            if id < 0 {
                return Err(value_error(format!(
                    "devices[{i}] = {id}: device ids are non-negative"
                )));
            }
            let id: usize = non_negative(&format!("devices[{i}]"), id)?;
            if let Some(j) = ids.iter().position(|&d| d == id) {
                return Err(value_error(format!(
                    "devices[{i}] = {id} repeats devices[{j}]: one rank per device"
                )));
            }
            ids.push(id);
        }
        if ids.is_empty() {
            return Err(value_error(
                "devices is empty: list at least one device (or leave devices=None for one)",
            ));
        }
        Ok(Devices::Ids(ids))
    }
}
