ALTER TABLE `cronq_jobs` DROP INDEX `cronq_jobs_claim`, ADD INDEX `cronq_jobs_claim` (`status`,`queue`,`available_at`,`id`,`finished_at`);--> statement-breakpoint
ALTER TABLE `cronq_dead_letters` ADD `reason_group` varchar(512);--> statement-breakpoint
CREATE INDEX `cronq_dead_letters_group` ON `cronq_dead_letters` (`reviewed_at`,`kind`,`reason_group`,`dead_at`);
