//! sql2ddb queue
