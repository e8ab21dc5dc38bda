//! How an export's data files are compressed, and what the manifest and
//! `import-table` call it.

/// How the data files are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// gzip (`.json.gz`).
    #[default]
    Gzip,
    /// Zstandard (`.json.zst`).
    Zstd,
    /// None (`.json`).
    None,
}

impl Compression {
    /// The name in the manifest: `gzip`, `zstd`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::None => "none",
        }
    }

    /// The name `import-table --input-compression-type` takes.
    pub fn import_name(self) -> &'static str {
        match self {
            Compression::Gzip => "GZIP",
            Compression::Zstd => "ZSTD",
            Compression::None => "NONE",
        }
    }

    /// The data files' extension after `.json`.
    pub fn extension(self) -> &'static str {
        match self {
            Compression::Gzip => ".gz",
            Compression::Zstd => ".zst",
            Compression::None => "",
        }
    }
}
