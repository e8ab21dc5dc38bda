//! sql2ddb dynamo
