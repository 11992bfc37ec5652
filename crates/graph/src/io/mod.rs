//! Dataset file formats; [`auto`] detects which one a path holds.

pub mod auto;
pub mod binary;
pub mod dgl;
pub mod edge_list;
pub mod gnn_benchmark;
pub mod npz;
pub mod ogb;
pub mod pickle;
pub mod planetoid;

/// The last component of `path` (its stem without the extension when `stem`), or `fallback`
/// when it has none (`/`, `..`): the name folder and file formats give their datasets.
pub(crate) fn file_name(path: &std::path::Path, stem: bool, fallback: &str) -> String {
    let part = if stem {
        path.file_stem()
    } else {
        path.file_name()
    };
    part.map_or_else(
        || fallback.to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}
