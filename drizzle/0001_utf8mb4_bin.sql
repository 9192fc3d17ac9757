-- Keys are compared byte for byte ('User:1' and 'user:1' are two jobs) and hold any Unicode,
-- whatever the database's default character set is.
ALTER TABLE `cronq_jobs` CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
--> statement-breakpoint
ALTER TABLE `cronq_dead_letters` CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
