//! Cosmos DB SQL queries (being written; see issue 3).
