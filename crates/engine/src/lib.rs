//! sql2ddb engine
