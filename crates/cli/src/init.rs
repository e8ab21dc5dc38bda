//! `sql2ddb init`: a commented mapping from the source's schema, on stdout.

use sql2ddb_engine::init::InitOptions;

use crate::outcome::Ended;

pub const EXIT_CODES: &str = "\
Exit codes:
  0   the mapping is printed on stdout
  64  usage error: unknown option, missing argument
  69  the source could not be reached, or refused
  78  the source URL is wrong, or a table asked for does not exist; with
      --follow, no table of the source can be followed (every reason listed)";

/// Arguments of `sql2ddb init`.
#[derive(clap::Args)]
pub struct InitArgs {
    /// Source URL (postgres://, mysql://, sqlite://); by default
    /// $DATABASE_URL, the variable the mapping it writes reads its URL from
    /// (the URL is not written into the mapping).
    #[arg(long, value_name = "URL", env = "DATABASE_URL", hide_env_values = true)]
    pub source: String,
    /// Only these tables, comma-separated (`table` or `schema.table`).
    #[arg(long, value_delimiter = ',', value_name = "A,B,…")]
    pub tables: Option<Vec<String>>,
    /// One DynamoDB table named NAME: child tables go into their parent's
    /// item collection, or are embedded in the parent's items.
    #[arg(long, value_name = "NAME", value_parser = crate::limits::table_name)]
    pub single_table: Option<String>,
    /// A mapping `run --follow` can follow: checked against the source as
    /// `run --follow` checks it; entities that cannot be followed are left
    /// out, and each reason (with what to change on the source) is written
    /// at the mapping's top.
    #[arg(long)]
    pub follow: bool,
}

/// Runs `sql2ddb init`.
pub async fn init(args: InitArgs) -> Ended {
    let opts = InitOptions {
        source: args.source,
        tables: args.tables,
        single_table: args.single_table,
        follow: args.follow,
    };
    let text = sql2ddb_engine::init::init(&opts).await?;
    print!("{text}");
    Ok(0)
}
