//! sql2ddb mapping
