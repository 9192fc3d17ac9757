ALTER TABLE `cronq_jobs` DROP INDEX `cronq_jobs_claim_queue`, DROP INDEX `cronq_jobs_recovery`, DROP INDEX `cronq_jobs_claim`, ADD INDEX `cronq_jobs_claim` (`status`,`queue`,`available_at`,`id`);
