//! sql2ddb source
